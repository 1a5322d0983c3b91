# Conveniences over scripts/ (the README's quick start uses the scripts, which need no make).
.PHONY: run test build fuzz fuzz-smoke soak soak-load bench clean

run:
	scripts/run

test:
	scripts/test

build:
	scripts/bootstrap && swift build

# Ten minutes of libFuzzer over framing, JSON and dispatch (see Fuzz/README.md).
fuzz:
	Fuzz/run.sh $(or $(FUZZ_SECONDS),600)

# The short run CI does.
fuzz-smoke:
	Fuzz/run.sh 60

# The long kill soaks. The safe save's (CI runs 10 rounds of 5 MB): SOAK_ROUNDS saves of a
# SOAK_MB document, each killed at a random moment while readers check every read is whole. The
# journal's (CI runs 50 trials): JOURNAL_TRIALS trace replays, each killed at a random moment, every
# edit acknowledged flushDelay + 50 ms before the kill recovered.
soak:
	scripts/bootstrap --tests && swift build
	DOCSESSION_SOAK_ROUNDS=$(or $(SOAK_ROUNDS),500) DOCSESSION_SOAK_MB=$(or $(SOAK_MB),20) \
	  DOCSESSION_BIN="$$(swift build --show-bin-path)/docsession" python3 -m pytest -q -s Tests/faults/test_kill_soak.py
	DOCSESSION_JOURNAL_TRIALS=$(or $(JOURNAL_TRIALS),1000) \
	  DOCSESSION_BIN="$$(swift build --show-bin-path)/docsession" python3 -m pytest -q -s Tests/faults/test_journal.py -k "sigkill_at_random_moments"

# The load soak (Tests/soak/README.md): 10,000 open documents of 10 KB, 8 pipelined writers for
# SOAK_LOAD_SECONDS (600) with autosave on, another program rewriting files; every text and file
# checked at the end; the server's RSS drawn to .build/soak-load/rss.png. CI runs 30 seconds of it.
soak-load:
	scripts/soak-load --seconds $(or $(SOAK_LOAD_SECONDS),600)

# Every side-by-side benchmark of Benchmarks/ (see Benchmarks/README.md) on the release server, and
# one table of every figure at the end (scripts/bench); about ten minutes. Quote runs from a quiet
# machine.
bench:
	scripts/bench

clean:
	rm -rf .build Fuzz/.build
