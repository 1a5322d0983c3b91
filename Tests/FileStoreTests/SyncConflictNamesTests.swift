import Testing

@testable import FileStore

private typealias Names = SyncConflictNames

@Suite("SyncConflictNames: the sync tools' conflict copies and temporary files")
struct SyncConflictNamesTests {
    @Test("Syncthing: stem.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext, with and without the device")
    func syncthing() throws {
        let copy = try #require(Names.parse("notes.sync-conflict-20261128-101502-ABCDEFG.md", of: "notes.md"))
        #expect(copy.tool == .syncthing && copy.device == "ABCDEFG")
        #expect(copy.date == .init(year: 2026, month: 11, day: 28, hour: 10, minute: 15, second: 2))
        #expect(Names.parse("notes.sync-conflict-20261128-101502.md", of: "notes.md")?.device == nil)
        #expect(Names.parse("notes.sync-conflict-20261128-101502-.md", of: "notes.md")?.device == nil)
        #expect(Names.parse("a.tar.sync-conflict-20261128-101502-XYZ1234.gz", of: "a.tar.gz")?.tool == .syncthing)
        #expect(Names.parse("Makefile.sync-conflict-20261128-101502-XYZ1234", of: "Makefile") != nil)
        #expect(Names.parse(".sync-conflict-20261128-101502-XYZ1234.bashrc", of: ".bashrc") != nil)
        // Not a copy of that file, or not a date.
        #expect(Names.parse("notes.sync-conflict-20261128-101502-ABCDEFG.md", of: "other.md") == nil)
        #expect(Names.parse("notes.sync-conflict-20261328-101502-ABCDEFG.md", of: "notes.md") == nil)
        #expect(Names.parse("notes.sync-conflict-2026112-101502-ABCDEFG.md", of: "notes.md") == nil)
        #expect(Names.parse("notes.md", of: "notes.md") == nil)
    }

    @Test("Nextcloud and ownCloud: (conflicted copy [user ]YYYY-MM-DD HHMMSS) and the older _conflict-")
    func nextcloud() throws {
        let plain = try #require(Names.parse("notes (conflicted copy 2026-11-28 101502).md", of: "notes.md"))
        #expect(plain.tool == .nextcloud && plain.device == nil && plain.date?.second == 2)
        let user = try #require(Names.parse("notes (conflicted copy Jane Doe 2026-11-28 101502).md", of: "notes.md"))
        #expect(user.device == "Jane Doe")
        #expect(Names.parse("README (conflicted copy 2026-11-28 101502)", of: "README")?.tool == .nextcloud)
        let old = try #require(Names.parse("notes_conflict-20261128-101502.md", of: "notes.md"))
        #expect(old.tool == .nextcloud && old.date?.hour == 10 && old.device == nil)
        #expect(Names.parse("notes_conflict-jane-20261128-101502.md", of: "notes.md")?.device == "jane")
        #expect(Names.parse("notes_conflict-20261128-1015.md", of: "notes.md") == nil)
        #expect(Names.parse("notes (conflicted copy 2026-11-28).md", of: "notes.md") == nil)
    }

    @Test("Seafile: (SFConflict EMAIL YYYY-MM-DD-HH-MM-SS)")
    func seafile() throws {
        let copy = try #require(Names.parse("notes (SFConflict jane@example.org 2026-11-28-10-15-02).md", of: "notes.md"))
        #expect(copy.tool == .seafile && copy.device == "jane@example.org")
        #expect(copy.date == .init(year: 2026, month: 11, day: 28, hour: 10, minute: 15, second: 2))
        #expect(Names.parse("notes (SFConflict jane@example.org 2026-11-28).md", of: "notes.md") == nil)
        #expect(Names.parse("notes (SFConflict 2026-11-28-10-15-02).md", of: "notes.md")?.device == nil)
    }

    @Test("Unison: (conflict[ #n]_on_YYYY-MM-DD)")
    func unison() throws {
        let copy = try #require(Names.parse("notes (conflict_on_2026-11-28).md", of: "notes.md"))
        #expect(copy.tool == .unison && copy.device == nil && copy.date == .init(year: 2026, month: 11, day: 28))
        #expect(Names.parse("notes (conflict #2_on_2026-11-28).md", of: "notes.md")?.tool == .unison)
        #expect(Names.parse("notes (conflict #_on_2026-11-28).md", of: "notes.md") == nil)
        #expect(Names.parse("notes (conflict_on_2026-11-28_was_deleted).md", of: "notes.md") != nil)
        // A dotfile's copy starts with the space (Unison takes all of `.bashrc` as the extension).
        #expect(Names.parse(" (conflict_on_2026-11-28).bashrc", of: ".bashrc")?.tool == .unison)
    }

    @Test("Dropbox: (NAME's conflicted copy YYYY-MM-DD), typographic apostrophe and a number")
    func dropbox() throws {
        let copy = try #require(Names.parse("notes (Jane Doe's conflicted copy 2026-11-28).md", of: "notes.md"))
        #expect(copy.tool == .dropbox && copy.device == "Jane Doe" && copy.date?.day == 28)
        #expect(Names.parse("notes (Jane\u{2019}s conflicted copy 2026-11-28).md", of: "notes.md")?.device == "Jane")
        #expect(Names.parse("notes (Jane's conflicted copy 2026-11-28 (1)).md", of: "notes.md")?.tool == .dropbox)
    }

    @Test("OneDrive: stem-HOST-safeBackup-NNNN.ext, a host with dashes read every way")
    func onedrive() throws {
        let copy = try #require(Names.parse("notes-laptop-safeBackup-0001.md", of: "notes.md"))
        #expect(copy.tool == .onedrive && copy.device == "laptop" && copy.date == nil)
        #expect(Names.parse("my-notes-work-pc-safeBackup-0002.md", of: "my-notes.md")?.device == "work-pc")
        #expect(Names.parse("my-notes-work-pc-safeBackup-0002.md", of: "my.md")?.device == "notes-work-pc")
        #expect(Names.candidates("my-notes-work-pc-safeBackup-0002.md").count == 3)
    }

    @Test("Temporary files are never copies: Syncthing, Unison, Nextcloud, partial downloads")
    func temporary() {
        for name in [".syncthing.notes.md.tmp", "~syncthing~notes.md.tmp", ".unison.notes.md.1a2b.unison.tmp",
                     ".notes.md.~1a2b3c", ".notes.md.part", "notes.md.partial", "notes.md.sbak"] {
            #expect(Names.isTemporary(name), "\(name)")
            #expect(Names.candidates(name).isEmpty, "\(name)")
        }
        for name in ["notes.md", "notes.md~", ".part", "part", ".notes.md", "a.~lock"] {
            #expect(!Names.isTemporary(name), "\(name)")
        }
    }

    @Test("A directory's copies counted per file in one reading of its names (only files that are there count)")
    func countsPerDirectory() {
        let names: Set<String> = [
            "notes.md", "notes.sync-conflict-20261128-101502-ABCDEFG.md", "notes (conflicted copy 2026-11-28 101502).md",
            "my-notes.md", "my-notes-work-pc-safeBackup-0001.md", ".syncthing.notes.md.tmp", "other.md",
            "gone.sync-conflict-20261128-101502-ABCDEFG.md",
        ]
        let counts = StorageLocations.conflictCopyCounts(among: names)
        // The OneDrive copy reads as a copy of `my.md`, `my-notes.md` or `my-notes-work.md`: only the one there counts.
        #expect(counts == ["notes.md": 2, "my-notes.md": 1])
        #expect(StorageLocations.conflictCopies(of: "notes.md", among: names) == 2)
        #expect(StorageLocations.conflictCopies(of: "other.md", among: names) == 0)
    }

    @Test("The names our own saves write beside a file are neither copies nor temporary files of a tool")
    func ourNames() {
        for name in [SafeSave.tempPrefix + "notes.md-1a2b3c", SafeSave.backupPrefix + "1234-abcdef"] {
            #expect(Names.candidates(name).isEmpty, "\(name)")
            #expect(!Names.isTemporary(name), "\(name)")
        }
    }
}
