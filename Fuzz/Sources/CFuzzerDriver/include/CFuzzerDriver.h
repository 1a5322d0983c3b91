#ifndef DOCSESSION_FUZZ_CFUZZERDRIVER_H
#define DOCSESSION_FUZZ_CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (compiler-rt, FuzzerDriver.cpp), linked in by -sanitize=fuzzer. The executable's
// own entry point calls it, because SwiftPM points `main` at the module's entry function
// (DocSessionFuzz_main) when it links an executable target.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
