/* The details-page prefix scan of nsroof.importers.ncu.csv_export, compiled.

Rows of one launch in an Nsight Compute details-page export repeat the launch's identity cells (ID ...
CC, with the kernel name and NVTX state: ~93% of a large export's bytes) byte for byte. This walks the
rows of a window of the file with memchr (the line end) and memcmp (the prefix), keeps each row's tail
(from `Section Name` on) and parses the identity cells only where a new prefix starts. It does exactly
what the pure-Python scan in ncu_csv._scan_rows_python does, row for row; tests hold the two equal.

    scan(buffer, pos, stop, prefix, section_at, have_heads)
        -> (tails, ntails, runs, blanks, pos, prefix, have_heads) | None

buffer      the file's bytes (an mmap), read-only
pos, stop   rows starting in [pos, stop) are scanned; a row starting before `stop` is read whole
prefix      the identity prefix in force (cells and the comma after them); b"" before the first row
section_at  the number of identity cells before `Section Name`
have_heads  whether a launch's first row was seen before `pos`
tails       the tails, each with its line end, concatenated
runs        int64 quadruples (launch ID, index of the run's first tail in this window, head start,
            head end) as bytes; the head is the prefix without its final comma
blanks      int64 per whitespace-only line: the index (in this window) of the tail after it
None        a row that is not what ncu writes (the caller then takes another reader): a line that is
            neither blank nor quoted identity cells, a newline inside them, an ID of more than 18
            digits, an empty line before the first launch, or a last line without a newline.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} growbuf;

static int grow_append(growbuf *b, const void *src, size_t n) {
    if (n == 0) {
        return 0; /* memcpy to a buffer not allocated yet is undefined even for no bytes */
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            cap *= 2;
        }
        char *p = PyMem_RawRealloc(b->data, cap);
        if (p == NULL) {
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int is_space(unsigned char c) {
    /* bytes.strip(): ASCII whitespace */
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Parse `section_at` identity cells at line[0..len): "ID" then quoted cells, each followed by a comma,
   no newline inside. Returns the prefix length (through the last comma) or 0 when they are not there. */
static size_t parse_head(const unsigned char *line, size_t len, Py_ssize_t section_at, int64_t *id) {
    size_t p = 0;
    int64_t value = 0;
    int digits = 0;
    if (len < 4 || line[p++] != '"') {
        return 0;
    }
    while (p < len && line[p] >= '0' && line[p] <= '9') {
        if (++digits > 18) {
            return 0;
        }
        value = value * 10 + (line[p] - '0');
        p++;
    }
    if (digits == 0 || p + 1 >= len || line[p] != '"' || line[p + 1] != ',') {
        return 0;
    }
    p += 2;
    for (Py_ssize_t cell = 1; cell < section_at; cell++) {
        if (p >= len || line[p] != '"') {
            return 0;
        }
        p++;
        for (;;) {
            if (p >= len || line[p] == '\n') {
                return 0;
            }
            if (line[p] == '"') {
                if (p + 1 < len && line[p + 1] == '"') {
                    p += 2; /* a doubled quote inside the cell */
                    continue;
                }
                if (p + 1 < len && line[p + 1] == ',') {
                    p += 2; /* the cell's closing quote and its comma */
                    break;
                }
                return 0;
            }
            p++;
        }
    }
    *id = value;
    return p;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop, section_at;
    const char *prefix_in;
    Py_ssize_t prefix_in_len;
    int have_heads;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nny#np", &view, &pos, &stop, &prefix_in, &prefix_in_len, &section_at,
                          &have_heads)) {
        return NULL;
    }
    const unsigned char *buf = view.buf;
    size_t size = (size_t)view.len;
    if (pos < 0 || stop < pos || section_at < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: bad window or cell count");
        return NULL;
    }
    growbuf tails = {0}, runs = {0}, blanks = {0};
    unsigned char *prefix = PyMem_RawMalloc(prefix_in_len ? (size_t)prefix_in_len : 1);
    size_t plen = (size_t)prefix_in_len;
    size_t pcap = plen ? plen : 1;
    int64_t ntails = 0;
    int failed = 0, nomem = 0;
    size_t at = (size_t)pos;
    if (prefix == NULL) {
        nomem = 1;
    } else {
        memcpy(prefix, prefix_in, plen);
    }

    Py_BEGIN_ALLOW_THREADS
    while (!nomem && !failed && at < size && at < (size_t)stop) {
        const unsigned char *line = buf + at;
        const unsigned char *nl = memchr(line, '\n', size - at);
        if (nl == NULL) {
            failed = 1; /* a last line without a newline */
            break;
        }
        size_t len = (size_t)(nl - line) + 1;
        if (plen && len >= plen && memcmp(line, prefix, plen) == 0) {
            if (grow_append(&tails, line + plen, len - plen) < 0) {
                nomem = 1;
                break;
            }
            ntails++;
            at += len;
            continue;
        }
        int64_t id = 0;
        size_t hlen = parse_head(line, len, section_at, &id);
        if (hlen == 0) {
            int blank = 1;
            for (size_t i = 0; i < len; i++) {
                if (!is_space(line[i])) {
                    blank = 0;
                    break;
                }
            }
            if (!blank || (!have_heads && len == 1)) {
                failed = 1;
                break;
            }
            if (grow_append(&blanks, &ntails, sizeof ntails) < 0) {
                nomem = 1;
                break;
            }
            at += len;
            continue;
        }
        if (hlen > pcap) {
            unsigned char *p = PyMem_RawRealloc(prefix, hlen);
            if (p == NULL) {
                nomem = 1;
                break;
            }
            prefix = p;
            pcap = hlen;
        }
        memcpy(prefix, line, hlen);
        plen = hlen;
        have_heads = 1;
        int64_t run[4] = {id, ntails, (int64_t)at, (int64_t)(at + hlen - 1)};
        if (grow_append(&runs, run, sizeof run) < 0 || grow_append(&tails, line + hlen, len - hlen) < 0) {
            nomem = 1;
            break;
        }
        ntails++;
        at += len;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (nomem) {
        PyErr_NoMemory();
    } else if (failed) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("(y#Ly#y#ny#N)", tails.data ? tails.data : "", (Py_ssize_t)tails.len, (long long)ntails,
                               runs.data ? runs.data : "", (Py_ssize_t)runs.len, blanks.data ? blanks.data : "",
                               (Py_ssize_t)blanks.len, (Py_ssize_t)at, (const char *)prefix, (Py_ssize_t)plen,
                               PyBool_FromLong(have_heads));
    }
    PyMem_RawFree(tails.data);
    PyMem_RawFree(runs.data);
    PyMem_RawFree(blanks.data);
    PyMem_RawFree(prefix);
    return result;
}

/* ---------------------------------------------------------------------------------------------
   split_tails: the tails' cells, for the common case only.

    split_tails(chunks, width, max_fields, metric_at, key_first, key_last, value_at)
        -> (keys, codes, rows, offsets, values, rules) | None

chunks      a list of bytes: the rows' tails as _scan_rows returned them, window by window (each
            chunk whole rows, each row ending in its only newline)
width       the cells of a metric row (ncu ends them after `Metric Value` with a trailing comma)
max_fields  the cells of the header's tail: rule rows are wider than metric rows, up to this
metric_at, key_first, key_last, value_at
            cell indexes: `Metric Name`; the first and last of the text cells that name a metric
            (section, body item label, metric, unit); `Metric Value`
keys        per distinct key, its cells from key_first to key_last as they stand in the file (quoted)
codes       int32 per kept row: its key's index in `keys`
rows        int64 per kept row: its index among the tails
offsets, values
            the kept rows' values, unquoted, as an Arrow string array's int32 offsets and data
rules       how many rule rows (wider than a metric row, no metric) were dropped

Kept rows are the metric rows with a metric name; rows of `width` cells without one are dropped, as
the pyarrow route drops them. None for anything else, and the caller takes the pyarrow route: a row
narrower than a metric row or wider than the header, a wide row with a metric, an empty line, a quote
inside an unquoted cell or after a closing quote, a carriage return other than before the line end,
bytes in the metric cells that are not UTF-8. So this accepts a strict subset of what pyarrow reads,
and reads it the same way (tests/importers/ncu/csv_export/test_ncu_csv_scan.py holds the two routes equal).
--------------------------------------------------------------------------------------------- */

#define MAX_WIDTH 64

typedef struct {
    size_t start, end; /* the raw cell, quotes included */
    int quoted, escapes;
} cell_span;

/* strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as Arrow validates it */
static int utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* eight ASCII bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c == 0xE0) {
            need = 2;
            lo = 0xA0;
        } else if (c >= 0xE1 && c <= 0xEC) {
            need = 2;
        } else if (c == 0xED) {
            need = 2;
            hi = 0x9F;
        } else if (c >= 0xEE && c <= 0xEF) {
            need = 2;
        } else if (c == 0xF0) {
            need = 3;
            lo = 0x90;
        } else if (c >= 0xF1 && c <= 0xF3) {
            need = 3;
        } else if (c == 0xF4) {
            need = 3;
            hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i <= need) {
            return 0; /* the sequence runs past the cell */
        }
        if (s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (size_t k = 2; k <= need; k++) {
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) {
                return 0;
            }
        }
        i += need + 1;
    }
    return 1;
}

static int cell_empty(const cell_span *c) {
    return c->end - c->start == (c->quoted ? 2u : 0u);
}

typedef struct {
    int32_t *slots; /* key index + 1; 0 = free */
    size_t mask;
    growbuf store;  /* the keys' bytes */
    growbuf bounds; /* per key: (offset, length) as two size_t */
    growbuf next;   /* per key: the key that followed it last (int32, -1 none): consecutive launches
                       list their metrics in one order, so a row's key is nearly always the one that
                       followed the previous row's key last time: a memcmp instead of a hash */
    int32_t count;
} keytable;

static uint64_t fnv1a(const unsigned char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int key_equal(const keytable *t, int32_t k, const unsigned char *s, size_t n) {
    const size_t *b = (const size_t *)t->bounds.data + 2 * (size_t)k;
    return b[1] == n && memcmp(t->store.data + b[0], s, n) == 0;
}

static int keytable_grow(keytable *t) {
    size_t cap = (t->mask + 1) * 2;
    int32_t *slots = PyMem_RawCalloc(cap, sizeof(int32_t));
    if (slots == NULL) {
        return -1;
    }
    for (int32_t k = 0; k < t->count; k++) {
        const size_t *b = (const size_t *)t->bounds.data + 2 * (size_t)k;
        size_t i = (size_t)fnv1a((const unsigned char *)t->store.data + b[0], b[1]) & (cap - 1);
        while (slots[i]) {
            i = (i + 1) & (cap - 1);
        }
        slots[i] = k + 1;
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* the key's index, added if new; -1 when out of memory */
static int32_t keytable_code(keytable *t, int32_t prev, const unsigned char *s, size_t n) {
    if (prev >= 0) {
        int32_t guess = ((const int32_t *)t->next.data)[prev];
        if (guess >= 0 && key_equal(t, guess, s, n)) {
            return guess;
        }
    }
    size_t i = (size_t)fnv1a(s, n) & t->mask;
    int32_t code = -1;
    while (t->slots[i]) {
        if (key_equal(t, t->slots[i] - 1, s, n)) {
            code = t->slots[i] - 1;
            break;
        }
        i = (i + 1) & t->mask;
    }
    if (code < 0) {
        size_t b[2] = {t->store.len, n};
        int32_t none = -1;
        if (grow_append(&t->store, s, n) < 0 || grow_append(&t->bounds, b, sizeof b) < 0 ||
            grow_append(&t->next, &none, sizeof none) < 0) {
            return -1;
        }
        code = t->count++;
        t->slots[i] = code + 1;
        if ((size_t)t->count * 2 > t->mask + 1 && keytable_grow(t) < 0) {
            return -1;
        }
    }
    if (prev >= 0) {
        ((int32_t *)t->next.data)[prev] = code;
    }
    return code;
}

/* append a cell's content, unquoted ("" inside a quoted cell is one quote) */
static int append_content(growbuf *out, const unsigned char *buf, const cell_span *c) {
    if (!c->quoted) {
        return grow_append(out, buf + c->start, c->end - c->start);
    }
    if (!c->escapes) {
        return grow_append(out, buf + c->start + 1, c->end - c->start - 2);
    }
    for (size_t i = c->start + 1; i < c->end - 1; i++) {
        if (grow_append(out, buf + i, 1) < 0) {
            return -1;
        }
        if (buf[i] == '"') {
            i++; /* the second quote of a pair */
        }
    }
    return 0;
}

typedef struct {
    Py_ssize_t width, max_fields, metric_at, key_first, key_last, value_at;
    growbuf codes, rows, offsets, values;
    keytable keys;
    int64_t rules, row;
    int32_t prev;
    int failed, nomem;
} tail_state;

/* the rows of one chunk of tails (whole lines); called without the GIL */
static void split_chunk(tail_state *st, const unsigned char *buf, size_t size) {
    cell_span cells[MAX_WIDTH];
    size_t at = 0;
    while (!st->nomem && !st->failed && at < size) {
        const unsigned char *nl = memchr(buf + at, '\n', size - at);
        if (nl == NULL) {
            st->failed = 1;
            break;
        }
        size_t end = (size_t)(nl - buf);
        size_t stop = (end > at && buf[end - 1] == '\r') ? end - 1 : end;
        if (stop == at) {
            st->failed = 1; /* an empty line: pyarrow skips it */
            break;
        }
        Py_ssize_t nf = 0;
        size_t p = at;
        for (;;) {
            cell_span c = {p, p, 0, 0};
            if (p < stop && buf[p] == '"') {
                c.quoted = 1;
                p++;
                for (;;) {
                    const unsigned char *q = p < stop ? memchr(buf + p, '"', stop - p) : NULL;
                    if (q == NULL) {
                        st->failed = 1; /* no closing quote before the line end */
                        break;
                    }
                    p = (size_t)(q - buf);
                    if (p + 1 < stop && buf[p + 1] == '"') {
                        c.escapes = 1; /* a doubled quote inside the cell */
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                if (st->failed || (p < stop && buf[p] != ',')) {
                    st->failed = 1;
                    break;
                }
            } else {
                while (p < stop && buf[p] != ',') {
                    if (buf[p] == '"' || buf[p] == '\r') {
                        st->failed = 1;
                        break;
                    }
                    p++;
                }
                if (st->failed) {
                    break;
                }
            }
            c.end = p;
            if (nf < MAX_WIDTH) {
                cells[nf] = c;
            }
            nf++;
            if (p >= stop) {
                break;
            }
            p++; /* the comma; a cell follows it, empty at the line end */
        }
        if (st->failed) {
            break;
        }
        if (nf == st->width) {
            size_t k0 = cells[st->key_first].start, k1 = cells[st->key_last].end;
            const cell_span *v = &cells[st->value_at];
            if (!utf8_ok(buf + k0, k1 - k0) || !utf8_ok(buf + v->start, v->end - v->start)) {
                st->failed = 1;
                break;
            }
            if (!cell_empty(&cells[st->metric_at])) {
                int32_t code = keytable_code(&st->keys, st->prev, buf + k0, k1 - k0);
                if (code < 0 || grow_append(&st->codes, &code, sizeof code) < 0 ||
                    grow_append(&st->rows, &st->row, sizeof st->row) < 0 || append_content(&st->values, buf, v) < 0) {
                    st->nomem = 1;
                    break;
                }
                if (st->values.len > INT32_MAX) {
                    st->failed = 1; /* past int32 offsets: the pyarrow route chunks it */
                    break;
                }
                int32_t off = (int32_t)st->values.len;
                if (grow_append(&st->offsets, &off, sizeof off) < 0) {
                    st->nomem = 1;
                    break;
                }
                st->prev = code;
            }
        } else if (nf > st->width && nf <= st->max_fields && cell_empty(&cells[st->metric_at])) {
            st->rules++;
        } else {
            st->failed = 1;
            break;
        }
        st->row++;
        at = end + 1;
    }
}

static PyObject *split_tails(PyObject *self, PyObject *args) {
    PyObject *chunks;
    tail_state st = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "O!nnnnnn", &PyList_Type, &chunks, &st.width, &st.max_fields, &st.metric_at,
                          &st.key_first, &st.key_last, &st.value_at)) {
        return NULL;
    }
    if (st.width < 1 || st.width > MAX_WIDTH || st.max_fields < st.width || st.metric_at < 0 ||
        st.metric_at >= st.width || st.key_first < 0 || st.key_last < st.key_first || st.key_last >= st.width ||
        st.value_at < 0 || st.value_at >= st.width) {
        PyErr_SetString(PyExc_ValueError, "split_tails: cell indexes outside the metric row");
        return NULL;
    }
    int32_t zero = 0;
    st.prev = -1;
    st.keys.slots = PyMem_RawCalloc(64, sizeof(int32_t));
    st.keys.mask = 63;
    if (st.keys.slots == NULL || grow_append(&st.offsets, &zero, sizeof zero) < 0) {
        st.nomem = 1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(chunks) && !st.nomem && !st.failed; i++) {
        Py_buffer view;
        if (PyObject_GetBuffer(PyList_GET_ITEM(chunks, i), &view, PyBUF_SIMPLE) < 0) {
            PyMem_RawFree(st.keys.slots);
            PyMem_RawFree(st.offsets.data);
            PyMem_RawFree(st.codes.data);
            PyMem_RawFree(st.rows.data);
            PyMem_RawFree(st.values.data);
            PyMem_RawFree(st.keys.store.data);
            PyMem_RawFree(st.keys.bounds.data);
            PyMem_RawFree(st.keys.next.data);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        split_chunk(&st, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&view);
    }
    int nomem = st.nomem, failed = st.failed;
    growbuf codes = st.codes, rows = st.rows, offsets = st.offsets, values = st.values;
    keytable keys = st.keys;
    int64_t rules = st.rules;

    PyObject *result = NULL;
    if (nomem) {
        PyErr_NoMemory();
    } else if (failed) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *list = PyList_New(keys.count);
        if (list != NULL) {
            for (int32_t k = 0; k < keys.count; k++) {
                const size_t *b = (const size_t *)keys.bounds.data + 2 * (size_t)k;
                PyObject *item = PyBytes_FromStringAndSize(keys.store.data + b[0], (Py_ssize_t)b[1]);
                if (item == NULL) {
                    Py_CLEAR(list);
                    break;
                }
                PyList_SET_ITEM(list, k, item);
            }
        }
        if (list != NULL) {
            result = Py_BuildValue("(Ny#y#y#y#L)", list, codes.data ? codes.data : "", (Py_ssize_t)codes.len,
                                   rows.data ? rows.data : "", (Py_ssize_t)rows.len, offsets.data,
                                   (Py_ssize_t)offsets.len, values.data ? values.data : "", (Py_ssize_t)values.len,
                                   (long long)rules);
        }
    }
    PyMem_RawFree(codes.data);
    PyMem_RawFree(rows.data);
    PyMem_RawFree(offsets.data);
    PyMem_RawFree(values.data);
    PyMem_RawFree(keys.slots);
    PyMem_RawFree(keys.store.data);
    PyMem_RawFree(keys.bounds.data);
    PyMem_RawFree(keys.next.data);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Split a window of details-page rows into identity prefixes and tails."},
    {"split_tails", split_tails, METH_VARARGS, "The metric cells of the tails (the common case; None otherwise)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowscan", "The compiled details-page prefix scan (see ncu_csv).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rowscan(void) { return PyModule_Create(&module); }
