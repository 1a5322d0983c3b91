/// The unit in which a position's `character` counts, as negotiated with an LSP client.
///
/// The raw values are the names used on the wire (`positionEncoding` in LSP 3.17).
public enum PositionEncoding: String, Sendable, CaseIterable {
    /// UTF-8 code units (bytes).
    case utf8 = "utf-8"
    /// UTF-16 code units: a character above U+FFFF counts two (a surrogate pair). LSP's default.
    case utf16 = "utf-16"
    /// Unicode scalars (code points).
    case utf32 = "utf-32"
}
