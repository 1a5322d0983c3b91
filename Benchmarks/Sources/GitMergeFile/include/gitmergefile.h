// libgit2's git_merge_file (the xdiff three-way merge git uses), called on three byte buffers for
// MergeCompare (issue 16, point 3). Debian's libgit2-dev (1.5.1); linked with -lgit2.
#ifndef GIT_MERGE_FILE_SHIM_H
#define GIT_MERGE_FILE_SHIM_H

#include <stddef.h>

/// git_libgit2_init; returns its count (> 0) or a negative error.
int gitmerge_init(void);

/// libgit2's version, "major.minor.revision".
const char *gitmerge_version(void);

/// The outcome of one merge: `clean` is libgit2's `automergeable`; `text`/`length` the merged text
/// (with conflict markers when not clean), owned by `opaque` until gitmerge_free.
typedef struct {
    int error;          // git_merge_file's return (0 on success)
    int clean;
    const char *text;
    size_t length;
    void *opaque;
} gitmerge_result;

/// Flags for `style`: 0 the default (GIT_MERGE_FILE_DEFAULT), 1 GIT_MERGE_FILE_STYLE_DIFF3.
gitmerge_result gitmerge_merge(const void *base, size_t base_length, const void *ours, size_t ours_length,
                               const void *theirs, size_t theirs_length, int diff3);

void gitmerge_free(gitmerge_result *result);

#endif
