/* The details-page prefix scan of nsroof.importers.ncu_csv, compiled.

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

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Split a window of details-page rows into identity prefixes and tails."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowscan", "The compiled details-page prefix scan (see ncu_csv).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rowscan(void) { return PyModule_Create(&module); }
