// The JSON codec's floor: json-c called directly, as a C server would call it. See codecfloor.h.
#include "codecfloor.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

struct codecfloor {
    struct json_tokener *tokener;
};

// The flags the JSON module serialises with (JSONSerializer.swift).
#define FLOOR_TO_STRING_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
// Member names added as the JSON module adds them (JSONObject names are unique; the names are
// copied, since a Swift string's bytes are not constant).
#define FLOOR_ADD_FLAGS JSON_C_OBJECT_ADD_KEY_IS_NEW

codecfloor *codecfloor_new(int max_depth) {
    codecfloor *floor = malloc(sizeof *floor);
    if (!floor) return NULL;
    floor->tokener = json_tokener_new_ex(max_depth + 1);
    if (!floor->tokener) {
        free(floor);
        return NULL;
    }
    json_tokener_set_flags(floor->tokener, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    return floor;
}

void codecfloor_free(codecfloor *floor) {
    if (!floor) return;
    json_tokener_free(floor->tokener);
    free(floor);
}

static inline void add(struct json_object *object, const char *key, struct json_object *value) {
    json_object_object_add_ex(object, key, value, FLOOR_ADD_FLAGS);
}

/// Serialises `root`, keeps the bytes in `output` if asked, frees the tree; returns the length.
static inline uint64_t serialise_and_free(struct json_object *root, codecfloor_output *output) {
    size_t length = 0;
    const char *text = json_object_to_json_string_length(root, FLOOR_TO_STRING_FLAGS, &length);
    uint64_t sum = text ? (uint64_t)length + (unsigned char)text[length / 2] : 0;
    if (output && output->out && text) {
        size_t n = length < output->capacity ? length : output->capacity;
        memcpy(output->out, text, n);
        output->length = length;
    }
    json_object_put(root);
    return sum;
}

static inline struct json_object *member(struct json_object *object, const char *key) {
    struct json_object *value = NULL;
    if (!json_object_object_get_ex(object, key, &value)) return NULL;
    return value;
}

static inline int64_t integer_member(struct json_object *object, const char *key, int *ok) {
    struct json_object *value = member(object, key);
    if (!value || !json_object_is_type(value, json_type_int)) {
        *ok = 0;
        return 0;
    }
    return json_object_get_int64(value);
}

uint64_t codecfloor_edit_requests(codecfloor *floor, const char *body, size_t length, long count,
                                  codecfloor_output *output) {
    uint64_t sum = 0;
    for (long n = 0; n < count; n++) {
        json_tokener_reset(floor->tokener);
        struct json_object *root = json_tokener_parse_ex(floor->tokener, body, (int)length + 1);
        if (json_tokener_get_error(floor->tokener) != json_tokener_success ||
            json_tokener_get_parse_end(floor->tokener) != length || !json_object_is_type(root, json_type_object)) {
            json_object_put(root);
            return 0;
        }
        int ok = 1;
        // The message: jsonrpc "2.0", an integer id, a string method, params an object.
        struct json_object *id = member(root, "id");
        struct json_object *jsonrpc = member(root, "jsonrpc");
        struct json_object *method = member(root, "method");
        struct json_object *params = member(root, "params");
        if (!id || !json_object_is_type(id, json_type_int) || !jsonrpc ||
            !json_object_is_type(jsonrpc, json_type_string) || strcmp(json_object_get_string(jsonrpc), "2.0") != 0 ||
            !method || !json_object_is_type(method, json_type_string) || !params ||
            !json_object_is_type(params, json_type_object)) {
            json_object_put(root);
            return 0;
        }
        int64_t request_id = json_object_get_int64(id);
        sum += (uint64_t)json_object_get_string_len(method);
        // The params of document/edit.
        struct json_object *document = member(params, "document");
        if (!document || !json_object_is_type(document, json_type_string)) ok = 0;
        else sum += (uint64_t)json_object_get_string_len(document) + (unsigned char)json_object_get_string(document)[0];
        int64_t version = integer_member(params, "version", &ok);
        struct json_object *edits = member(params, "edits");
        if (!edits || !json_object_is_type(edits, json_type_array)) ok = 0;
        size_t edit_count = ok ? json_object_array_length(edits) : 0;
        for (size_t i = 0; i < edit_count && ok; i++) {
            struct json_object *edit = json_object_array_get_idx(edits, i);
            if (!json_object_is_type(edit, json_type_object)) {
                ok = 0;
                break;
            }
            struct json_object *range = member(edit, "range");
            if (range) {
                struct json_object *start = member(range, "start");
                struct json_object *end = member(range, "end");
                if (!start || !end) {
                    ok = 0;
                    break;
                }
                sum += (uint64_t)integer_member(start, "line", &ok) + (uint64_t)integer_member(start, "character", &ok);
                sum += (uint64_t)integer_member(end, "line", &ok) + (uint64_t)integer_member(end, "character", &ok);
            }
            struct json_object *text = member(edit, "text");
            if (!text || !json_object_is_type(text, json_type_string)) {
                ok = 0;
                break;
            }
            int text_length = json_object_get_string_len(text);
            const char *text_bytes = json_object_get_string(text);
            sum += (uint64_t)text_length + (text_length ? (unsigned char)text_bytes[0] : 0);
        }
        struct json_object *undo = member(params, "undo");
        if (undo) sum += 1;
        if (!ok) {
            json_object_put(root);
            return 0;
        }
        // The response.
        struct json_object *response = json_object_new_object();
        add(response, "jsonrpc", json_object_new_string("2.0"));
        add(response, "id", json_object_new_int64(request_id));
        struct json_object *result = json_object_new_object();
        add(result, "version", json_object_new_int64(version + 1));
        add(response, "result", result);
        sum += serialise_and_free(response, output);
        json_object_put(root);
    }
    return sum;
}

uint64_t codecfloor_edit_responses(int64_t id, int64_t version, long count, codecfloor_output *output) {
    uint64_t sum = 0;
    for (long n = 0; n < count; n++) {
        struct json_object *response = json_object_new_object();
        add(response, "jsonrpc", json_object_new_string("2.0"));
        add(response, "id", json_object_new_int64(id));
        struct json_object *result = json_object_new_object();
        add(result, "version", json_object_new_int64(version));
        add(response, "result", result);
        sum += serialise_and_free(response, output);
    }
    return sum;
}

uint64_t codecfloor_state_changed(const char *document, const char *uri, int64_t version, const char *reason,
                                  long count, codecfloor_output *output) {
    uint64_t sum = 0;
    for (long n = 0; n < count; n++) {
        struct json_object *message = json_object_new_object();
        add(message, "jsonrpc", json_object_new_string("2.0"));
        add(message, "method", json_object_new_string("document/stateChanged"));
        struct json_object *params = json_object_new_object();
        add(params, "document", json_object_new_string(document));
        add(params, "uri", json_object_new_string(uri));
        add(params, "version", json_object_new_int64(version));
        add(params, "state", json_object_new_array_ext(1));
        add(params, "previousState", json_object_new_array_ext(1));
        add(params, "reason", json_object_new_string(reason));
        add(params, "hasUnsavedChanges", json_object_new_boolean(1));
        add(message, "params", params);
        sum += serialise_and_free(message, output);
    }
    return sum;
}

uint64_t codecfloor_open_responses(const codecfloor_open_info *info, long count, codecfloor_output *output) {
    uint64_t sum = 0;
    for (long n = 0; n < count; n++) {
        struct json_object *response = json_object_new_object();
        add(response, "jsonrpc", json_object_new_string("2.0"));
        add(response, "id", json_object_new_int64(info->id));
        struct json_object *result = json_object_new_object();
        add(result, "document", json_object_new_string(info->document));
        add(result, "uri", json_object_new_string(info->uri));
        add(result, "version", json_object_new_int64(info->version));
        add(result, "text", json_object_new_string_len(info->text, (int)info->text_length));
        add(result, "state", json_object_new_array_ext(1));
        add(result, "fileType", json_object_new_string(info->file_type));
        add(result, "displayName", json_object_new_string(info->display_name));
        add(result, "modificationDate", json_object_new_string(info->modification_date));
        add(result, "encoding", json_object_new_string(info->encoding));
        add(result, "byteOrderMark", json_object_new_boolean(0));
        add(result, "lineEnding", json_object_new_string(info->line_ending));
        add(result, "hasUnsavedChanges", json_object_new_boolean(0));
        add(response, "result", result);
        sum += serialise_and_free(response, output);
    }
    return sum;
}
