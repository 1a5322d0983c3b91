/// Why a glob pattern was refused, and where.
public struct GlobError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// The pattern is the empty string.
        case empty
        /// The pattern contains a NUL character, which no file name holds.
        case nul
        /// The pattern starts with "/": patterns are relative to the query's root.
        case absolute
        /// A `[` has no closing `]`.
        case unclosedBracket
        /// A `{` has no closing `}`.
        case unclosedBrace
        /// The braces expand to more than ``GlobPattern/maximumAlternatives`` patterns.
        case tooManyAlternatives
    }

    /// The pattern refused.
    public var pattern: String
    /// Where the problem starts: an offset in the pattern's Unicode scalars (0 for the first).
    public var position: Int
    public var reason: Reason

    public init(pattern: String, position: Int, reason: Reason) {
        self.pattern = pattern
        self.position = position
        self.reason = reason
    }

    public var description: String {
        let why: String
        switch reason {
        case .empty: why = "the pattern is empty"
        case .nul: why = "a NUL character"
        case .absolute: why = "the pattern starts with \"/\" (patterns are relative to the root)"
        case .unclosedBracket: why = "a \"[\" is never closed by \"]\""
        case .unclosedBrace: why = "a \"{\" is never closed by \"}\""
        case .tooManyAlternatives:
            why = "the braces expand to more than \(GlobPattern.maximumAlternatives) patterns"
        }
        return "invalid glob pattern \"\(pattern)\" at \(position): \(why)"
    }
}

/// A file-name pattern in the syntax of VS Code's and LSP's file watchers, matched against
/// "/"-separated paths relative to a root (`src/app/main.swift`, never a leading "/").
///
/// - `*` matches any run of characters within one path segment (not "/"), including none;
/// - `?` matches one character other than "/";
/// - `[abc]`, `[a-z]` match one character of the set, `[!x]` or `[^x]` one not in it (a `]` right
///   after the `[` or `[!` is a member; a set never matches "/");
/// - `{a,b}` matches either alternative; alternatives may hold "/", `**` and other braces;
/// - `**` as a whole segment matches any number of segments, including none: `**/*.txt` matches
///   `a.txt` and `x/y/a.txt`, `a/**/b` matches `a/b` and `a/x/y/b`, a trailing `a/**` everything
///   below `a` (not `a` itself), and `**` alone every path. Elsewhere (`a**b`) it is one `*`.
///
/// Everything else, the backslash included, stands for itself: there are no escapes (use `[*]`
/// for a literal star, `[{]` for a brace). Matching is case-sensitive and by Unicode scalar.
/// Dotfiles are not special: `*` matches `.gitignore` and `**` descends into `.git`.
///
/// A match runs the pattern as a Thompson automaton (a set of states advanced one character at a
/// time), so it costs at most the path's length times the pattern's, with no backtracking:
/// `*a*a*a*b` against a long name of `a`s stays linear in the name.
public struct GlobPattern: Sendable, Hashable, CustomStringConvertible {
    /// The most patterns braces may expand to (`{a,b}{c,d}` is four).
    public static let maximumAlternatives = 1_024

    /// The pattern as given.
    public let pattern: String
    /// One program per brace alternative.
    private let programs: [Program]

    /// Parses `pattern`; throws when it is empty, holds a NUL, starts with "/" or leaves a `[` or
    /// `{` unclosed.
    public init(_ pattern: String) throws(GlobError) {
        self.pattern = pattern
        let scalars = Array(pattern.unicodeScalars)
        guard !scalars.isEmpty else { throw GlobError(pattern: pattern, position: 0, reason: .empty) }
        if let nul = scalars.firstIndex(of: "\0") {
            throw GlobError(pattern: pattern, position: nul, reason: .nul)
        }
        if scalars[0] == "/" { throw GlobError(pattern: pattern, position: 0, reason: .absolute) }
        var expander = BraceExpander(pattern: pattern, scalars: scalars)
        let alternatives = try expander.expandAll()
        var seen = Set<[Unicode.Scalar]>()
        programs = alternatives.filter { seen.insert($0).inserted }.map(Program.init)
    }

    public var description: String { pattern }

    public static func == (lhs: GlobPattern, rhs: GlobPattern) -> Bool { lhs.pattern == rhs.pattern }
    public func hash(into hasher: inout Hasher) { hasher.combine(pattern) }

    /// Whether `relativePath` ("/"-separated, relative to the root) matches the pattern.
    public func matches(_ relativePath: String) -> Bool {
        let scalars = Array(relativePath.unicodeScalars)
        var visited = 0
        return programs.contains { $0.run(scalars, directoryPrefix: false, visited: &visited) }
    }

    /// The work a match of `relativePath` does, in states visited, and the bound the automaton
    /// keeps it under: each state at most once per scalar (tests: no backtracking, whatever the
    /// pattern).
    func work(matching relativePath: String) -> (visited: Int, bound: Int) {
        let scalars = Array(relativePath.unicodeScalars)
        var visited = 0
        for program in programs { _ = program.run(scalars, directoryPrefix: false, visited: &visited) }
        return (visited, programs.reduce(0) { $0 + $1.instructions.count * (scalars.count + 1) })
    }

    /// Whether some path below the directory `relativeDirectory` ("" for the root) could match:
    /// false lets a walk skip the directory (`src/*.ts` never looks inside `docs`).
    public func mayMatchInside(_ relativeDirectory: String) -> Bool {
        if relativeDirectory.isEmpty { return true }
        var scalars = Array(relativeDirectory.unicodeScalars)
        scalars.append("/")
        var visited = 0
        return programs.contains { $0.run(scalars, directoryPrefix: true, visited: &visited) }
    }
}

// MARK: - Brace expansion

/// Expands `{a,b}` (nested too) into the list of brace-free patterns, checking brackets on the way
/// (a `,` or `}` inside `[...]` belongs to the set).
private struct BraceExpander {
    let pattern: String
    let scalars: [Unicode.Scalar]
    var index = 0

    init(pattern: String, scalars: [Unicode.Scalar]) {
        self.pattern = pattern
        self.scalars = scalars
    }

    mutating func expandAll() throws(GlobError) -> [[Unicode.Scalar]] {
        let result = try sequence(insideBraces: false)
        return result
    }

    /// Where the bracket expression opening at `start` ends (the index of its `]`).
    func bracketEnd(_ start: Int) throws(GlobError) -> Int {
        var cursor = start + 1
        if cursor < scalars.count && (scalars[cursor] == "!" || scalars[cursor] == "^") { cursor += 1 }
        if cursor < scalars.count && scalars[cursor] == "]" { cursor += 1 }
        while cursor < scalars.count && scalars[cursor] != "]" { cursor += 1 }
        guard cursor < scalars.count else {
            throw GlobError(pattern: pattern, position: start, reason: .unclosedBracket)
        }
        return cursor
    }

    /// A sequence of pieces up to the end (or, inside braces, up to a `,` or `}`), as the cross
    /// product of its pieces' alternatives.
    mutating func sequence(insideBraces: Bool) throws(GlobError) -> [[Unicode.Scalar]] {
        var results: [[Unicode.Scalar]] = [[]]
        while index < scalars.count {
            let scalar = scalars[index]
            if insideBraces && (scalar == "," || scalar == "}") { break }
            if scalar == "[" {
                let end = try bracketEnd(index)
                let piece = Array(scalars[index...end])
                for position in results.indices { results[position].append(contentsOf: piece) }
                index = end + 1
            } else if scalar == "{" {
                let open = index
                index += 1
                var options: [[Unicode.Scalar]] = []
                while true {
                    options.append(contentsOf: try sequence(insideBraces: true))
                    guard index < scalars.count else {
                        throw GlobError(pattern: pattern, position: open, reason: .unclosedBrace)
                    }
                    let separator = scalars[index]
                    index += 1
                    if separator == "}" { break }
                }
                guard results.count * options.count <= GlobPattern.maximumAlternatives else {
                    throw GlobError(pattern: pattern, position: open, reason: .tooManyAlternatives)
                }
                results = results.flatMap { prefix in options.map { prefix + $0 } }
            } else {
                for position in results.indices { results[position].append(scalar) }
                index += 1
            }
        }
        return results
    }
}

// MARK: - The automaton

/// One brace-free pattern compiled into a Thompson NFA.
private struct Program: Sendable {
    enum Instruction: Sendable {
        /// Consumes this scalar.
        case scalar(Unicode.Scalar, next: Int)
        /// Consumes any scalar but "/".
        case anyInSegment(next: Int)
        /// Consumes any scalar, "/" included.
        case anything(next: Int)
        /// Consumes a scalar in (or, negated, not in) the ranges; never "/".
        case set([ClosedRange<Unicode.Scalar>], negated: Bool, next: Int)
        /// Continues at both places without consuming.
        case split(Int, Int)
        /// The whole path matched.
        case accept
    }

    var instructions: [Instruction] = []

    init(_ scalars: [Unicode.Scalar]) {
        var code: [Instruction] = []
        var index = 0
        let count = scalars.count
        while index < count {
            let scalar = scalars[index]
            switch scalar {
            case "*":
                var end = index
                while end < count && scalars[end] == "*" { end += 1 }
                let wholeSegment = end - index == 2 && (index == 0 || scalars[index - 1] == "/")
                    && (end == count || scalars[end] == "/")
                let here = code.count
                if wholeSegment && end < count {
                    // `**/`: (anything "/")? -- zero or more whole segments.
                    code.append(.split(here + 1, here + 4))
                    code.append(.split(here + 2, here + 3))
                    code.append(.anything(next: here + 1))
                    code.append(.scalar("/", next: here + 4))
                    index = end + 1
                } else if wholeSegment {
                    // A trailing `**`: anything at all.
                    code.append(.split(here + 1, here + 2))
                    code.append(.anything(next: here))
                    index = end
                } else {
                    code.append(.split(here + 1, here + 2))
                    code.append(.anyInSegment(next: here))
                    index = end
                }
            case "?":
                code.append(.anyInSegment(next: code.count + 1))
                index += 1
            case "[":
                // Validated by the expander: a closing "]" exists.
                var cursor = index + 1
                var negated = false
                if scalars[cursor] == "!" || scalars[cursor] == "^" {
                    negated = true
                    cursor += 1
                }
                var ranges: [ClosedRange<Unicode.Scalar>] = []
                var first = true
                while first || scalars[cursor] != "]" {
                    first = false
                    let low = scalars[cursor]
                    if cursor + 2 < count && scalars[cursor + 1] == "-" && scalars[cursor + 2] != "]" {
                        let high = scalars[cursor + 2]
                        if low <= high { ranges.append(low...high) }
                        cursor += 3
                    } else {
                        ranges.append(low...low)
                        cursor += 1
                    }
                }
                code.append(.set(ranges, negated: negated, next: code.count + 1))
                index = cursor + 1
            default:
                code.append(.scalar(scalar, next: code.count + 1))
                index += 1
            }
        }
        code.append(.accept)
        instructions = code
    }

    /// Runs the automaton over `input`. With `directoryPrefix`, answers whether some continuation
    /// of the input could still match (a consuming state is alive at the end); otherwise whether
    /// the input matches as a whole. `visited` counts the states entered (``GlobPattern/work(matching:)``).
    func run(_ input: [Unicode.Scalar], directoryPrefix: Bool, visited: inout Int) -> Bool {
        let size = instructions.count
        var current: [Int] = []
        var next: [Int] = []
        current.reserveCapacity(size)
        next.reserveCapacity(size)
        // The step at which each state was last added: a state joins a set once per step.
        var marks = [Int](repeating: -1, count: size)
        var stack: [Int] = []

        func add(_ start: Int, _ step: Int, to set: inout [Int]) {
            stack.append(start)
            while let state = stack.popLast() {
                if marks[state] == step { continue }
                marks[state] = step
                visited += 1
                if case .split(let first, let second) = instructions[state] {
                    stack.append(second)
                    stack.append(first)
                } else {
                    set.append(state)
                }
            }
        }

        add(0, 0, to: &current)
        var step = 0
        for scalar in input {
            step += 1
            next.removeAll(keepingCapacity: true)
            for state in current {
                switch instructions[state] {
                case .scalar(let expected, let target):
                    if scalar == expected { add(target, step, to: &next) }
                case .anyInSegment(let target):
                    if scalar != "/" { add(target, step, to: &next) }
                case .anything(let target):
                    add(target, step, to: &next)
                case .set(let ranges, let negated, let target):
                    if scalar != "/" && ranges.contains(where: { $0.contains(scalar) }) != negated {
                        add(target, step, to: &next)
                    }
                case .split, .accept:
                    break
                }
            }
            swap(&current, &next)
            if current.isEmpty { return false }
        }
        if directoryPrefix {
            return current.contains { if case .accept = instructions[$0] { false } else { true } }
        }
        return current.contains { if case .accept = instructions[$0] { true } else { false } }
    }
}
