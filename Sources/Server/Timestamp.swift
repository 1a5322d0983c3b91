#if canImport(Glibc)
    import Glibc
#endif

/// Dates on the wire: ISO 8601 in UTC with milliseconds (`2026-11-22T03:04:05.678Z`).
enum Timestamp {
    static func iso8601(nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        let milliseconds = Int((nanoseconds % 1_000_000_000) / 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(milliseconds), 3))Z"
    }
}
