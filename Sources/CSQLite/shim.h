#ifndef DOCSESSION_CSQLITE_SHIM_H
#define DOCSESSION_CSQLITE_SHIM_H

// SQLite as Debian's libsqlite3-dev installs it (3.40.1). The library is built with the session
// extension and the pre-update hook; sqlite3.h declares their functions only when these are
// defined, so they are defined here, before the include.
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>

#endif
