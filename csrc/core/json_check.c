/*
 * json_check.c — a validating JSON scanner (no values are built): the
 * native file's metadata must be strict UTF-8 JSON with an object on top.
 * Recursive descent with a depth limit, every read bounds-checked.
 */
#include <stdint.h>

#include "native_file.h"

typedef struct colibri_json {
    const unsigned char *s;
    size_t n, i;          /* text length, read position */
    const char *what;     /* the first problem, NULL while none */
} colibri_json;

static int colibri_json_fail(colibri_json *j, const char *what) {
    if (!j->what) j->what = what;
    return 0;
}

static void colibri_json_space(colibri_json *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' ||
                           j->s[j->i] == '\r')) {
        j->i++;
    }
}

/* One UTF-8 encoded code point >= 0x80 at j->i (RFC 3629: shortest form, no
 * surrogates, at most U+10FFFF). */
static int colibri_json_utf8(colibri_json *j) {
    unsigned char c = j->s[j->i];
    int extra;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { extra = 1; cp = c & 0x1Fu; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { extra = 2; cp = c & 0x0Fu; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { extra = 3; cp = c & 0x07u; min = 0x10000; }
    else return colibri_json_fail(j, "invalid UTF-8 byte");
    if (j->n - j->i <= (size_t)extra) return colibri_json_fail(j, "truncated UTF-8 sequence");
    for (int k = 1; k <= extra; k++) {
        unsigned char cc = j->s[j->i + (size_t)k];
        if ((cc & 0xC0u) != 0x80u) return colibri_json_fail(j, "invalid UTF-8 continuation byte");
        cp = (cp << 6) | (cc & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return colibri_json_fail(j, "invalid UTF-8 code point");
    }
    j->i += (size_t)extra + 1;
    return 1;
}

static int colibri_json_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string; j->i at its opening quote. */
static int colibri_json_string(colibri_json *j) {
    j->i++;
    while (j->i < j->n) {
        unsigned char c = j->s[j->i];
        if (c == '"') { j->i++; return 1; }
        if (c < 0x20) return colibri_json_fail(j, "control character in a string");
        if (c >= 0x80) {
            if (!colibri_json_utf8(j)) return 0;
            continue;
        }
        if (c != '\\') { j->i++; continue; }
        if (j->n - j->i < 2) break;
        unsigned char e = j->s[j->i + 1];
        if (e == 'u') {
            if (j->n - j->i < 6) break;
            for (size_t k = 2; k < 6; k++) {
                if (!colibri_json_hex(j->s[j->i + k])) return colibri_json_fail(j, "bad \\u escape");
            }
            j->i += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
            j->i += 2;
        } else {
            return colibri_json_fail(j, "bad escape in a string");
        }
    }
    return colibri_json_fail(j, "unterminated string");
}

static size_t colibri_json_digits(colibri_json *j) {
    size_t start = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
    return j->i - start;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int colibri_json_number(colibri_json *j) {
    if (j->s[j->i] == '-') j->i++;
    if (j->i < j->n && j->s[j->i] == '0') {
        j->i++;
    } else if (colibri_json_digits(j) == 0) {
        return colibri_json_fail(j, "bad number");
    }
    if (j->i < j->n && j->s[j->i] == '.') {
        j->i++;
        if (colibri_json_digits(j) == 0) return colibri_json_fail(j, "bad number fraction");
    }
    if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
        j->i++;
        if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-')) j->i++;
        if (colibri_json_digits(j) == 0) return colibri_json_fail(j, "bad number exponent");
    }
    return 1;
}

static int colibri_json_literal(colibri_json *j, const char *word, size_t len) {
    if (j->n - j->i < len) return colibri_json_fail(j, "unexpected end of text");
    for (size_t k = 0; k < len; k++) {
        if (j->s[j->i + k] != (unsigned char)word[k]) return colibri_json_fail(j, "unexpected character");
    }
    j->i += len;
    return 1;
}

static int colibri_json_value(colibri_json *j, int depth);

/* An object or array; j->i at its opening bracket. */
static int colibri_json_container(colibri_json *j, int depth) {
    unsigned char close = j->s[j->i] == '{' ? '}' : ']';
    if (depth >= COLIBRI_FILE_JSON_MAX_DEPTH) return colibri_json_fail(j, "nested too deeply");
    j->i++;
    colibri_json_space(j);
    if (j->i < j->n && j->s[j->i] == close) { j->i++; return 1; }
    for (;;) {
        if (close == '}') {
            if (j->i >= j->n || j->s[j->i] != '"') return colibri_json_fail(j, "expected a key string");
            if (!colibri_json_string(j)) return 0;
            colibri_json_space(j);
            if (j->i >= j->n || j->s[j->i] != ':') return colibri_json_fail(j, "expected ':'");
            j->i++;
        }
        if (!colibri_json_value(j, depth + 1)) return 0;
        colibri_json_space(j);
        if (j->i >= j->n) return colibri_json_fail(j, "unexpected end of text");
        if (j->s[j->i] == close) { j->i++; return 1; }
        if (j->s[j->i] != ',') return colibri_json_fail(j, "expected ',' or a closing bracket");
        j->i++;
        colibri_json_space(j);
    }
}

static int colibri_json_value(colibri_json *j, int depth) {
    colibri_json_space(j);
    if (j->i >= j->n) return colibri_json_fail(j, "unexpected end of text");
    switch (j->s[j->i]) {
    case '{': case '[': return colibri_json_container(j, depth);
    case '"': return colibri_json_string(j);
    case 't': return colibri_json_literal(j, "true", 4);
    case 'f': return colibri_json_literal(j, "false", 5);
    case 'n': return colibri_json_literal(j, "null", 4);
    default:
        if (j->s[j->i] == '-' || (j->s[j->i] >= '0' && j->s[j->i] <= '9')) return colibri_json_number(j);
        return colibri_json_fail(j, "unexpected character");
    }
}

int colibri_json_check_object(const char *text, size_t len, size_t *error_at, const char **what) {
    colibri_json j = {(const unsigned char *)text, len, 0, NULL};
    colibri_json_space(&j);
    if (j.i >= j.n || j.s[j.i] != '{') {
        colibri_json_fail(&j, "the top value is not an object");
    } else if (colibri_json_value(&j, 0)) {
        colibri_json_space(&j);
        if (j.i != j.n) colibri_json_fail(&j, "extra text after the object");
    }
    if (!j.what) return 1;
    *error_at = j.i;
    *what = j.what;
    return 0;
}
