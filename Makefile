# Conveniences over scripts/ (the README's quick start uses the scripts, which need no make).
.PHONY: run test build fuzz fuzz-smoke soak bench clean

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

# The long kill soak of the safe save (CI runs 10 rounds of 5 MB): SOAK_ROUNDS saves of a
# SOAK_MB document, each killed at a random moment while readers check every read is whole.
soak:
	scripts/bootstrap --tests && swift build
	DOCSESSION_SOAK_ROUNDS=$(or $(SOAK_ROUNDS),500) DOCSESSION_SOAK_MB=$(or $(SOAK_MB),20) \
	  DOCSESSION_BIN="$$(swift build --show-bin-path)/docsession" python3 -m pytest -q -s Tests/faults/test_kill_soak.py

# Every side-by-side ratio of Benchmarks/ (see Benchmarks/README.md), on the release server; a
# few minutes. Quote runs from a quiet machine.
BENCH = swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build
bench:
	scripts/bootstrap && swift build -c release
	$(BENCH) BufferRatios
	$(BENCH) OpenRatios
	$(BENCH) SaveRatios
	$(BENCH) EditLatency
	$(BENCH) CodecRatios 5
	$(BENCH) ProtocolRatios --trace automerge-paper,rustcode --edits 30000 --rounds 3
	$(BENCH) NeovimPeer --trace automerge-paper --edits 30000 --rounds 3 --save-rounds 5

clean:
	rm -rf .build Fuzz/.build
