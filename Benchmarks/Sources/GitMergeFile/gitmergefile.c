#include "gitmergefile.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>

int gitmerge_init(void) { return git_libgit2_init(); }

const char *gitmerge_version(void) {
    static char text[32];
    int major = 0, minor = 0, revision = 0;
    git_libgit2_version(&major, &minor, &revision);
    snprintf(text, sizeof text, "%d.%d.%d", major, minor, revision);
    return text;
}

gitmerge_result gitmerge_merge(const void *base, size_t base_length, const void *ours, size_t ours_length,
                               const void *theirs, size_t theirs_length, int diff3) {
    gitmerge_result result = {0};
    git_merge_file_input ancestor_input, ours_input, theirs_input;
    git_merge_file_input_init(&ancestor_input, GIT_MERGE_FILE_INPUT_VERSION);
    git_merge_file_input_init(&ours_input, GIT_MERGE_FILE_INPUT_VERSION);
    git_merge_file_input_init(&theirs_input, GIT_MERGE_FILE_INPUT_VERSION);
    ancestor_input.ptr = base; ancestor_input.size = base_length;
    ours_input.ptr = ours; ours_input.size = ours_length;
    theirs_input.ptr = theirs; theirs_input.size = theirs_length;
    git_merge_file_options options;
    git_merge_file_options_init(&options, GIT_MERGE_FILE_OPTIONS_VERSION);
    if (diff3) options.flags |= GIT_MERGE_FILE_STYLE_DIFF3;
    git_merge_file_result *out = calloc(1, sizeof *out);
    result.error = git_merge_file(out, &ancestor_input, &ours_input, &theirs_input, &options);
    result.clean = out->automergeable != 0;
    result.text = out->ptr;
    result.length = out->len;
    result.opaque = out;
    return result;
}

void gitmerge_free(gitmerge_result *result) {
    git_merge_file_result *out = result->opaque;
    if (out) {
        git_merge_file_result_free(out);
        free(out);
    }
    result->opaque = NULL;
}
