import CXXHash
import SystemCalls
import SystemPackage
#if canImport(Glibc)
    import Glibc
#endif

/// XXH64 of a file's bytes, fed in pieces: the content part of a file's identity, which catches a
/// change that leaves size and times as they were, and spares a false conflict when a file was
/// rewritten with the same bytes (a `touch`, an editor saving unchanged text). Also names a
/// document's slot in the version store (the XXH64 of its path), so the function and its seed (0)
/// must stay as they are: those names are on disk.
///
/// libxxhash's streaming XXH64 (Debian's libxxhash-dev). Its state is the library's, allocated by
/// it; a copy of a hasher shares it until one of them is fed (copy on write), so hashers stay values.
public struct ContentHasher: Sendable {
    /// An `XXH64_state_t` of libxxhash's, freed with its owner. Mutated only through a hasher that
    /// holds the sole reference, which is what makes sending it safe.
    private final class State: @unchecked Sendable {
        let pointer: OpaquePointer

        init() {
            guard let pointer = XXH64_createState() else { fatalError("XXH64_createState: out of memory") }
            self.pointer = pointer
        }

        deinit { XXH64_freeState(pointer) }
    }

    private var state = State()

    public init(seed: UInt64 = 0) {
        _ = XXH64_reset(state.pointer, seed)
    }

    /// Feeds the next bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        if !isKnownUniquelyReferenced(&state) {
            let copy = State()
            XXH64_copyState(copy.pointer, state.pointer)
            state = copy
        }
        _ = XXH64_update(state.pointer, base, bytes.count)
    }

    /// Feeds the next bytes.
    public mutating func update(_ bytes: UnsafeBufferPointer<UInt8>) {
        update(UnsafeRawBufferPointer(bytes))
    }

    /// The hash of everything fed so far.
    public func finalize() -> UInt64 {
        XXH64_digest(state.pointer)
    }

    /// The hash of `bytes` at once (libxxhash's one-shot XXH64, seed 0).
    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        if let hash = bytes.withContiguousStorageIfAvailable({ XXH64($0.baseAddress, $0.count, 0) }) { return hash }
        return Array(bytes).withUnsafeBufferPointer { XXH64($0.baseAddress, $0.count, 0) }
    }

    /// The hash of the file at `path` and its identity, read in one pass; nil when the file
    /// changed while it was read (its identity before and after differ) or cannot be read.
    public static func hashFile(path: String) -> (hash: UInt64, identity: FileIdentity)? {
        guard let file = try? Descriptor.open(path, .readOnly, options: [FileDescriptor.OpenOptions(rawValue: O_NOCTTY), .nonBlocking]) else {
            return nil
        }
        return hashFile(fd: file.rawValue)
    }

    /// The same for an open file (read from its start with `pread`).
    public static func hashFile(fd: Int32) -> (hash: UInt64, identity: FileIdentity)? {
        var before = stat()
        guard fstat(fd, &before) == 0, before.st_mode & S_IFMT == S_IFREG else { return nil }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        var hasher = ContentHasher()
        var offset: Int64 = 0
        while true {
            let piece = UnsafeMutableRawBufferPointer(start: buffer, count: size)
            guard let got = try? readFully(into: piece, from: FileDescriptor(rawValue: fd), at: offset) else { return nil }
            hasher.update(UnsafeRawBufferPointer(start: buffer, count: got))
            offset += Int64(got)
            if got < size { break }  // the end of the file
        }
        var after = stat()
        guard fstat(fd, &after) == 0 else { return nil }
        let identity = FileIdentity(after)
        guard FileIdentity(before).sameState(as: identity), offset == identity.size else { return nil }
        return (hasher.finalize(), identity)
    }
}
