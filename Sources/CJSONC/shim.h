#ifndef DOCSESSION_CJSONC_SHIM_H
#define DOCSESSION_CJSONC_SHIM_H

// json-c as Debian's libjson-c-dev installs it (/usr/include/json-c).
#include <json-c/json.h>

#endif
