import Testing

@testable import FileStore

private func glob(_ pattern: String) throws -> GlobPattern { try GlobPattern(pattern) }

@Suite("GlobPattern: VS Code / LSP file-watcher globs")
struct GlobPatternTests {
    @Test("* matches within one segment, never across /")
    func star() throws {
        let pattern = try glob("*.txt")
        #expect(pattern.matches("a.txt"))
        #expect(pattern.matches(".txt"))
        #expect(!pattern.matches("a.txt.bak"))
        #expect(!pattern.matches("dir/a.txt"))
        #expect(try glob("src/*").matches("src/main.swift"))
        #expect(!(try glob("src/*").matches("src/a/main.swift")))
        #expect(try glob("a*b*c").matches("abc"))
        #expect(try glob("a*b*c").matches("aXXbYYc"))
        #expect(!(try glob("a*b*c").matches("aXXbYY/c")))
    }

    @Test("dotfiles are matched by * and ** like any name")
    func dotfiles() throws {
        #expect(try glob("*").matches(".gitignore"))
        #expect(try glob("**/*.json").matches(".vscode/settings.json"))
        #expect(try glob("**").matches(".git/config"))
    }

    @Test("? is one character, not /")
    func question() throws {
        let pattern = try glob("file?.md")
        #expect(pattern.matches("file1.md"))
        #expect(pattern.matches("fileé.md"))
        #expect(!pattern.matches("file.md"))
        #expect(!pattern.matches("file12.md"))
        #expect(!(try glob("a?b").matches("a/b")))
    }

    @Test("bracket sets: members, ranges, negation, ] first, never /")
    func brackets() throws {
        #expect(try glob("[abc].txt").matches("b.txt"))
        #expect(!(try glob("[abc].txt").matches("d.txt")))
        #expect(try glob("v[0-9].log").matches("v7.log"))
        #expect(!(try glob("v[0-9].log").matches("vx.log")))
        #expect(try glob("[!x]y").matches("ay"))
        #expect(!(try glob("[!x]y").matches("xy")))
        #expect(try glob("[^x]y").matches("ay"))
        #expect(!(try glob("[!x]y").matches("/y")))
        #expect(try glob("[]]").matches("]"))
        #expect(try glob("[a-]").matches("-"))
        #expect(try glob("[*]").matches("*"))
        #expect(!(try glob("[*]").matches("a")))
    }

    @Test("braces: alternatives, with / and ** inside, nested, sets holding , and }")
    func braces() throws {
        let pattern = try glob("*.{ts,js}")
        #expect(pattern.matches("a.ts"))
        #expect(pattern.matches("a.js"))
        #expect(!pattern.matches("a.rs"))
        let paths = try glob("{src/**,test}/*.swift")
        #expect(paths.matches("src/a/b/c.swift"))
        #expect(paths.matches("test/c.swift"))
        #expect(!paths.matches("other/c.swift"))
        let nested = try glob("{a,b{c,d}}.txt")
        #expect(nested.matches("a.txt"))
        #expect(nested.matches("bc.txt"))
        #expect(nested.matches("bd.txt"))
        #expect(!nested.matches("b.txt"))
        #expect(try glob("{[,}],x}").matches(","))
        #expect(try glob("{[,}],x}").matches("}"))
        #expect(try glob("{[,}],x}").matches("x"))
        #expect(try glob("a}b,c").matches("a}b,c"))  // outside braces, literal
        #expect(try glob("x{}y").matches("xy"))
    }

    @Test("** is any number of segments, including none")
    func globstar() throws {
        let pattern = try glob("**/*.txt")
        #expect(pattern.matches("a.txt"))
        #expect(pattern.matches("x/a.txt"))
        #expect(pattern.matches("x/y/a.txt"))
        #expect(!pattern.matches("x/y/a.txt/b"))
        let middle = try glob("a/**/b")
        #expect(middle.matches("a/b"))
        #expect(middle.matches("a/x/b"))
        #expect(middle.matches("a/x/y/b"))
        #expect(!middle.matches("a/xb"))
        #expect(!middle.matches("ab"))
        let trailing = try glob("a/**")
        #expect(trailing.matches("a/x"))
        #expect(trailing.matches("a/x/y"))
        #expect(!trailing.matches("a"))
        #expect(!trailing.matches("ab/x"))
        #expect(try glob("**").matches("anything/at/all.bin"))
        #expect(try glob("**/node_modules/**").matches("node_modules/x/y.js"))
        #expect(try glob("**/node_modules/**").matches("a/node_modules/y.js"))
        // Not a whole segment: one star.
        #expect(try glob("a**b").matches("aXb"))
        #expect(!(try glob("a**b").matches("a/b")))
    }

    @Test("case-sensitive; backslash is literal")
    func literalness() throws {
        #expect(!(try glob("*.TXT").matches("a.txt")))
        #expect(try glob("a\\b").matches("a\\b"))
    }

    @Test("errors name the position and the reason")
    func errors() {
        func reason(_ pattern: String) -> (GlobError.Reason, Int)? {
            do {
                _ = try GlobPattern(pattern)
                return nil
            } catch {
                return (error.reason, error.position)
            }
        }
        #expect(reason("")! == (.empty, 0))
        #expect(reason("ab[cd")! == (.unclosedBracket, 2))
        #expect(reason("[!]")! == (.unclosedBracket, 0))
        #expect(reason("x{a,b")! == (.unclosedBrace, 1))
        #expect(reason("{a,{b}")! == (.unclosedBrace, 0))
        #expect(reason("a\u{0}b")! == (.nul, 1))
        #expect(reason("/abs/*.txt")! == (.absolute, 0))
        #expect(reason("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")?.0 == .tooManyAlternatives)
        do {
            _ = try GlobPattern("ab[cd")
            Issue.record("an unclosed bracket was accepted")
        } catch {
            #expect(error.description.contains("at 2"))
            #expect(error.description.contains("\"[\""))
        }
        #expect(reason("a{b,c}[d]") == nil)
    }

    @Test("no backtracking: *a*a*a*a*a*a*a*b against 20,000 a's, and six globstars against 2,000 directories, visit each state at most once per character")
    func linear() throws {
        let pattern = try glob("*a*a*a*a*a*a*a*a*a*b")
        let name = String(repeating: "a", count: 20_000)
        #expect(!pattern.matches(name))
        #expect(pattern.matches(name + "b"))
        for input in [name, name + "b"] {
            let work = pattern.work(matching: input)
            #expect(work.visited > 0 && work.visited <= work.bound, "\(work)")
        }
        let globstars = try glob("**/**/**/**/**/**/x")
        let deep = Array(repeating: "d", count: 2_000).joined(separator: "/")
        #expect(!globstars.matches(deep))
        #expect(globstars.matches(deep + "/x"))
        for input in [deep, deep + "/x"] {
            let work = globstars.work(matching: input)
            #expect(work.visited > 0 && work.visited <= work.bound, "\(work)")
        }
    }

    @Test("mayMatchInside prunes directories no path can match under")
    func pruning() throws {
        let pattern = try glob("src/*.ts")
        #expect(pattern.mayMatchInside(""))
        #expect(pattern.mayMatchInside("src"))
        #expect(!pattern.mayMatchInside("docs"))
        #expect(!pattern.mayMatchInside("src/deeper"))
        #expect(try glob("**/*.ts").mayMatchInside("any/where"))
        #expect(try glob("{a,b}/x").mayMatchInside("b"))
        #expect(!(try glob("{a,b}/x").mayMatchInside("c")))
        #expect(!(try glob("*.txt").mayMatchInside("dir")))
    }

    @Test("equal patterns are equal and hash alike")
    func equality() throws {
        #expect(try glob("*.txt") == glob("*.txt"))
        #expect(Set([try glob("*.txt"), try glob("*.txt")]).count == 1)
        #expect(try glob("*.txt").description == "*.txt")
    }
}
