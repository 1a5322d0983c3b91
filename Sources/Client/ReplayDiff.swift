import JSON

/// Pretty-printing with a stable key order, the paths where two values differ, and a unified-style
/// line diff: what `docsession replay` shows for a message that differs from the recording.
enum ReplayDiff {
    /// `value` as indented JSON, object members sorted by name, two spaces a level.
    static func pretty(_ value: JSONValue) -> [String] {
        var lines: [String] = []
        write(value, indent: "", prefix: "", suffix: "", into: &lines)
        return lines
    }

    private static func write(_ value: JSONValue, indent: String, prefix: String, suffix: String, into lines: inout [String]) {
        switch value {
        case .object(let object) where !object.isEmpty:
            lines.append(indent + prefix + "{")
            let members = object.members.sorted { $0.key < $1.key }
            for (index, member) in members.enumerated() {
                let comma = index == members.count - 1 ? "" : ","
                write(member.value, indent: indent + "  ", prefix: JSONValue.string(member.key).jsonText + ": ", suffix: comma, into: &lines)
            }
            lines.append(indent + "}" + suffix)
        case .array(let elements) where !elements.isEmpty:
            lines.append(indent + prefix + "[")
            for (index, element) in elements.enumerated() {
                write(element, indent: indent + "  ", prefix: "", suffix: index == elements.count - 1 ? "" : ",", into: &lines)
            }
            lines.append(indent + "]" + suffix)
        default:
            lines.append(indent + prefix + value.jsonText + suffix)
        }
    }

    /// The paths (`result.versions[0].size`) where `expected` and `got` differ, at most `limit`.
    static func differingPaths(_ expected: JSONValue, _ got: JSONValue, path: String = "", limit: Int = 10) -> [String] {
        var found: [String] = []
        collect(expected, got, path: path, into: &found, limit: limit)
        return found
    }

    private static func collect(_ expected: JSONValue, _ got: JSONValue, path: String, into found: inout [String], limit: Int) {
        guard found.count < limit, expected != got else { return }
        switch (expected, got) {
        case (.object(let a), .object(let b)):
            let names = Set(a.keys).union(b.keys).sorted()
            for name in names {
                let child = path.isEmpty ? name : path + "." + name
                switch (a[name], b[name]) {
                case (let x?, let y?): collect(x, y, path: child, into: &found, limit: limit)
                case (_?, nil): if found.count < limit { found.append(child + " (missing)") }
                case (nil, _?): if found.count < limit { found.append(child + " (unexpected)") }
                case (nil, nil): break
                }
            }
        case (.array(let a), .array(let b)) where a.count == b.count:
            for index in a.indices {
                collect(a[index], b[index], path: path + "[\(index)]", into: &found, limit: limit)
            }
        default:
            found.append(path.isEmpty ? "(the whole message)" : path)
        }
    }

    /// A unified-style diff of two texts given as lines, with `context` lines around each change.
    static func unified(expected: [String], got: [String], context: Int = 3) -> [String] {
        // Longest common subsequence by dynamic programming: messages are short.
        let n = expected.count, m = got.count
        var table = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
        if n > 0 && m > 0 {
            for i in stride(from: n - 1, through: 0, by: -1) {
                for j in stride(from: m - 1, through: 0, by: -1) {
                    table[i][j] = expected[i] == got[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
                }
            }
        }
        enum Line { case same(String), removed(String), added(String) }
        var script: [Line] = []
        var i = 0, j = 0
        while i < n || j < m {
            if i < n, j < m, expected[i] == got[j] {
                script.append(.same(expected[i])); i += 1; j += 1
            } else if i < n, j == m || table[i + 1][j] >= table[i][j + 1] {
                script.append(.removed(expected[i])); i += 1
            } else {
                script.append(.added(got[j])); j += 1
            }
        }
        // Keep the changed lines and `context` lines around them; mark gaps with "@@".
        var keep = [Bool](repeating: false, count: script.count)
        for (index, line) in script.enumerated() {
            if case .same = line { continue }
            for k in max(0, index - context)...min(script.count - 1, index + context) { keep[k] = true }
        }
        var output: [String] = []
        var skipped = true
        for (index, line) in script.enumerated() {
            guard keep[index] else {
                skipped = true
                continue
            }
            if skipped { output.append("@@"); skipped = false }
            switch line {
            case .same(let text): output.append(" " + text)
            case .removed(let text): output.append("-" + text)
            case .added(let text): output.append("+" + text)
            }
        }
        return output
    }
}
