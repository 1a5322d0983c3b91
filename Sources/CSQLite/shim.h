#ifndef DOCSESSION_CSQLITE_SHIM_H
#define DOCSESSION_CSQLITE_SHIM_H

// SQLite as Debian's libsqlite3-dev installs it (3.40.1). The library is built with the session
// extension and the pre-update hook; sqlite3.h declares their functions only when these are
// defined, so they are defined here, before the include.
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>

// sqlite3_db_config is variadic, which Swift does not call: the integer settings
// (SQLITE_DBCONFIG_DEFENSIVE, SQLITE_DBCONFIG_TRUSTED_SCHEMA, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER,
// ...) through one fixed signature. Answers SQLite's code; `*now` the setting after the call.
static inline int docsession_sqlite3_db_config_int(sqlite3 *db, int op, int value, int *now) {
    return sqlite3_db_config(db, op, value, now);
}

#endif
