import Foundation
import Glibc

/// How many inotify instances in this process hold a watch on the inode at `path` (a directory the
/// test made for itself), read from each descriptor's `/proc/self/fdinfo` entry, which lists an
/// instance's watches as `inotify wd:… ino:<hex> sdev:<hex> …`.
///
/// The tests of `stop()` ask this rather than counting `anon_inode:inotify` links: the other suites
/// run in the same process and open and close their own watchers meanwhile, and a closed descriptor's
/// number may be handed straight to one of theirs. Only this test's watcher watches its own directory.
func inotifyInstancesWatching(_ path: String) -> Int {
    var status = stat()
    guard stat(path, &status) == 0 else { return 0 }
    let inode = String(status.st_ino, radix: 16)
    // The kernel prints the superblock's dev_t in its own encoding, major << 20 | minor; stat's is
    // glibc's (gnu_dev_major and gnu_dev_minor, macros Swift does not import).
    let dev = UInt64(status.st_dev)
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
    let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
    let device = String((major << 20) | minor, radix: 16)
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return names.filter { name in
        guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)) == "anon_inode:inotify",
              let info = try? String(contentsOfFile: "/proc/self/fdinfo/" + name, encoding: .utf8)
        else { return false }
        return info.split(separator: "\n").contains { line in
            line.hasPrefix("inotify ") && line.contains(" ino:\(inode) ") && line.contains(" sdev:\(device) ")
        }
    }.count
}
