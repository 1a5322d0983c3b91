// The floor the JSON codec is measured against (issue 7, point 1): json-c called directly on the
// same bytes, doing the same lookups and building the same responses, with nothing of ours around it.
#ifndef CODEC_FLOOR_H
#define CODEC_FLOOR_H

#include <stddef.h>
#include <stdint.h>

/// A json-c tokener set up as the JSON module's `JSONParser` sets up its own: depth limit
/// `max_depth + 1`, `JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8`; reused for every message.
typedef struct codecfloor codecfloor;

codecfloor *codecfloor_new(int max_depth);
void codecfloor_free(codecfloor *floor);

/// Where the last message's serialised response is copied when `out` is not NULL (for the check
/// that both sides write the same bytes; the timed runs pass NULL).
typedef struct {
    char *out;
    size_t capacity;
    size_t length;
} codecfloor_output;

/// `count` times: parses the `document/edit` request `body` (`length` bytes followed by a NUL, as
/// the JSON module passes it) with `json_tokener_parse_ex`, checks the parse end, reads `jsonrpc`,
/// `id`, `method`, `params`, then `document`, `version`, each edit's `range.start`/`range.end`
/// `line`/`character` and `text` (pointer and length) and `undo` with `json_object_object_get_ex`,
/// builds `{"jsonrpc":"2.0","id":<id>,"result":{"version":<version + 1>}}`, serialises it with
/// `json_object_to_json_string_length(PLAIN | NOSLASHESCAPE)` and frees both trees. Returns a
/// checksum of what it read, or 0 when the message is not what it should be.
uint64_t codecfloor_edit_requests(codecfloor *floor, const char *body, size_t length, long count,
                                  codecfloor_output *output);

/// `count` times: builds and serialises `{"jsonrpc":"2.0","id":<id>,"result":{"version":<version>}}`.
uint64_t codecfloor_edit_responses(int64_t id, int64_t version, long count, codecfloor_output *output);

/// `count` times: builds and serialises the `document/stateChanged` notification
/// `{"jsonrpc":"2.0","method":"document/stateChanged","params":{"document":<document>,"uri":<uri>,
/// "version":<version>,"state":[],"previousState":[],"reason":<reason>,"hasUnsavedChanges":true}}`.
uint64_t codecfloor_state_changed(const char *document, const char *uri, int64_t version, const char *reason,
                                  long count, codecfloor_output *output);

/// The members of a `document/open` result (strings NUL-terminated, except `text`, given with its
/// length).
typedef struct {
    int64_t id;
    const char *document;
    const char *uri;
    int64_t version;
    const char *text;
    size_t text_length;
    const char *file_type;
    const char *display_name;
    const char *modification_date;
    const char *encoding;
    const char *line_ending;
} codecfloor_open_info;

/// `count` times: builds and serialises the response to `document/open` with the document's info
/// (members in the order of `Server.info`: document, uri, version, text, state, fileType,
/// displayName, modificationDate, encoding, byteOrderMark, lineEnding, hasUnsavedChanges).
uint64_t codecfloor_open_responses(const codecfloor_open_info *info, long count, codecfloor_output *output);

#endif
