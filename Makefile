# Conveniences over scripts/ (the README's quick start uses the scripts, which need no make).
.PHONY: run test build fuzz fuzz-smoke clean

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

clean:
	rm -rf .build Fuzz/.build
