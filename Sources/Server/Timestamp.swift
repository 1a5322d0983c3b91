#if canImport(Glibc)
    import Glibc
#endif

/// Dates on the wire: ISO 8601 in UTC with milliseconds (`2026-11-22T03:04:05.678Z`).
enum Timestamp {
    /// Now, in nanoseconds since 1970 (the real-time clock).
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    static func iso8601(nanoseconds: Int64) -> String {
        // Floor division, so that times before 1970 keep a non-negative fraction.
        let (quotient, remainder) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        let wholeSeconds = remainder < 0 ? quotient - 1 : quotient
        let fraction = remainder < 0 ? remainder + 1_000_000_000 : remainder
        var seconds = time_t(wholeSeconds)
        let milliseconds = Int(fraction / 1_000_000)
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
