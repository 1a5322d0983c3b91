import Foundation

/// What every benchmark executable needs besides its workload: its options, and medians.

/// The command line after the program's name: `option("--x")` takes `--x VALUE`, `flag("--y")`
/// takes `--y`, and what is left (`remaining`) are the positional arguments, such as a round count.
public final class CommandLineOptions {
    public private(set) var remaining: [String]

    public init(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        remaining = arguments
    }

    /// The value after `name`, taken off the command line; nil when `name` is not there.
    public func option(_ name: String) -> String? {
        guard let index = remaining.firstIndex(of: name), index + 1 < remaining.count else { return nil }
        let value = remaining[index + 1]
        remaining.removeSubrange(index...index + 1)
        return value
    }

    /// Whether `name` is there (taken off the command line).
    public func flag(_ name: String) -> Bool {
        guard let index = remaining.firstIndex(of: name) else { return false }
        remaining.remove(at: index)
        return true
    }
}

/// The median (the mean of the two middle values for an even count).
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The monotonic clock in nanoseconds (one system call, nothing allocated: inside timed loops).
@inline(__always) public func nanoseconds() -> Int64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
}

/// The server binary the over-stdio benchmarks drive: `given` (`--server PATH`), else the root
/// package's release build, found from the current directory (the repository root or Benchmarks/)
/// or from the executable's place in Benchmarks/.build/<triple>/release/.
public func releaseServerPath(given: String?) -> String {
    if let given { return given }
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let fromExecutable = executable.deletingLastPathComponent()  // release
        .deletingLastPathComponent()  // <triple>
        .deletingLastPathComponent()  // .build
        .deletingLastPathComponent()  // Benchmarks
        .deletingLastPathComponent()  // the repository
        .appendingPathComponent(".build/release/docsession").path
    for candidate in [".build/release/docsession", "../.build/release/docsession", fromExecutable]
    where access(candidate, X_OK) == 0 {
        return candidate
    }
    fatalError("no docsession binary: build it with `swift build -c release` in the repository root, or pass --server PATH")
}

/// One row of `make bench`'s combined table, printed as `table| figure | median | spread | goal |
/// verdict` among a program's own output; `scripts/bench` collects the rows of every program into
/// one table. `goal` is `<= X`, `>= X`, `< X` or `-` (no goal: shown for context).
public func tableRow(_ figure: String, _ values: [Double], goal: String, format: String = "%.3f") {
    guard !values.isEmpty else { return }
    let sorted = values.sorted()
    let middle = median(values)
    var verdict = "-"
    let parts = goal.split(separator: " ")
    if parts.count == 2, let bound = Double(parts[1]) {
        let met: Bool
        switch parts[0] {
        case "<=": met = middle <= bound
        case ">=": met = middle >= bound
        case "<": met = middle < bound
        case ">": met = middle > bound
        default: met = false
        }
        verdict = met ? "met" : "MISSED"
    }
    print("table| \(figure) | " + String(format: format, middle) + " | " + String(format: format, sorted.first!) + "-"
        + String(format: format, sorted.last!) + " | \(goal) | \(verdict)")
}

/// The system's load averages over 1, 5 and 15 minutes, as /proc/loadavg gives them.
public func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)).map { $0.split(separator: " ").prefix(3).joined(separator: " ") } ?? "?"
}
