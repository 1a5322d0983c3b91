#ifndef DOCSESSION_CXXHASH_SHIM_H
#define DOCSESSION_CXXHASH_SHIM_H

// xxHash as Debian's libxxhash-dev installs it (0.8.1), linked as the shared libxxhash.so.0. Only
// the stable API: not XXH_STATIC_LINKING_ONLY, whose state layouts the header says never to use
// with dynamic linking; the streaming states are the library's own (XXH64_createState).
#include <xxhash.h>

#endif
