/*
 * native_file.h — internals of the Colibri-native file reader (never
 * installed). The byte layout is specified in docs/FORMAT.md.
 */
#ifndef COLIBRI_NATIVE_FILE_H
#define COLIBRI_NATIVE_FILE_H

#include <stddef.h>

#include "colibri.h"

/* ---- fixed sizes of format version 2 ---------------------------------------- */
#define COLIBRI_FILE_VERSION 2
#define COLIBRI_FILE_HEADER_BYTES 64
#define COLIBRI_FILE_ALIGN 64
#define COLIBRI_FILE_HPARAMS_V1_BYTES 88      /* the version-1 scalar fields */
#define COLIBRI_FILE_HPARAMS_FIXED_BYTES 92   /* those + n_ext, before the extension fields */
#define COLIBRI_FILE_ENTRY_BYTES 48           /* one tensor directory entry */
#define COLIBRI_FILE_JSON_MAX_DEPTH 64        /* nesting limit of the metadata JSON */

/* Whether text[0, len) is strict UTF-8 JSON (RFC 8259) whose top value is an
 * object, nested at most COLIBRI_FILE_JSON_MAX_DEPTH deep. Returns 1, or 0
 * with *error_at set to the byte offset of the first problem and *what to a
 * static description. Repeated keys are not detected here. */
int colibri_json_check_object(const char *text, size_t len, size_t *error_at, const char **what);

/* Unmaps a model's file and frees its record (NULL: nothing); called by
 * colibri_model_free for models from colibri_model_load. */
void colibri_file_close(colibri_file *f);

#endif /* COLIBRI_NATIVE_FILE_H */
