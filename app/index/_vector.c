/* The loops of app/index/vector.py that cost an append the most, in C.
 *
 * vector.py keeps the rules: how a token splits into lexemes (`_split_token`, called
 * back from here for a token not seen before), the byte budget, clamping. This does
 * the per-byte and per-token work that the Python loops spent most of the index's
 * cost on: it cuts the text's UTF-8 into tokens, looks each up in a cache of splits
 * kept here (no Python object per token), and gathers every lexeme's positions.
 * `grouped` gives exactly what vector.py's `_grouped` gives and `binary` what
 * `_joined` gives; tests/index/test_vector.py holds them to it. Without a C
 * compiler the package installs without this module and vector.py does it all.
 *
 * The cache: a token of up to `cached_bytes` bytes, once split, is kept (its bytes,
 * and its lexemes as numbers into a table of lexeme objects). It is emptied at the
 * start of a call once it holds `max_tokens` tokens (or its lexemes or terms pass
 * their bounds), never during one: a call's numbers stay valid to its end. A call
 * entered while another runs (another thread, while this one waits on a split in
 * Python) gets None and vector.py does that one in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A token slot: `len` 0 is empty (tokens are never empty). */
typedef struct {
    Py_hash_t hash;
    Py_ssize_t at;    /* its bytes in `arena` */
    Py_ssize_t split; /* its split in `terms` */
    Py_ssize_t len;
} Slot;

/* A lexeme slot of the interning table: -1 is empty. */
typedef struct {
    Py_hash_t hash;
    Py_ssize_t id;
} LexemeSlot;

static struct {
    Slot *slots;
    Py_ssize_t cap, n; /* cap a power of two */
    char *arena;
    Py_ssize_t arena_len, arena_cap;
    /* Each split: width, term count, then (lexeme id, offset) per term. */
    Py_ssize_t *terms;
    Py_ssize_t terms_len, terms_cap;
    PyObject **lexemes; /* strong references, by id */
    Py_hash_t *lexeme_hash;
    Py_ssize_t lexemes_n, lexemes_cap;
    LexemeSlot *lexeme_slots;
    Py_ssize_t lexeme_slots_cap;
    /* Per call: a lexeme's row is row_of[id] when stamp[id] is the call's. */
    uint32_t *stamp;
    Py_ssize_t *row_of;
    uint32_t call;
    int busy;
} cache;

/* Per call, in text order: which row each position goes to. */
typedef struct {
    Py_ssize_t *lexeme; /* row -> lexeme id */
    Py_ssize_t *count;  /* row -> positions */
    Py_ssize_t rows, rows_cap;
    Py_ssize_t *hit_row;
    uint16_t *hit_at;
    Py_ssize_t hits, hits_cap;
} Gathered;

static Py_hash_t
hash_bytes(const char *data, Py_ssize_t len)
{
#if PY_VERSION_HEX >= 0x030E0000
    return Py_HashBuffer(data, len);
#else
    /* CPython's own (randomised) hash of bytes: what a dict of bytes keys would use. */
    return _Py_HashBytes(data, len);
#endif
}

static int
grow(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t to = *cap ? *cap : 64;
    while (to < need) {
        to *= 2;
    }
    void *grown = PyMem_Realloc(*items, (size_t)to * size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *cap = to;
    return 0;
}

static void
cache_clear(void)
{
    for (Py_ssize_t i = 0; i < cache.lexemes_n; i++) {
        Py_DECREF(cache.lexemes[i]);
    }
    cache.lexemes_n = 0;
    if (cache.slots != NULL) {
        memset(cache.slots, 0, (size_t)cache.cap * sizeof(Slot));
    }
    cache.n = 0;
    if (cache.lexeme_slots != NULL) {
        memset(cache.lexeme_slots, 0xFF, (size_t)cache.lexeme_slots_cap * sizeof(LexemeSlot));
    }
    cache.arena_len = 0;
    cache.terms_len = 0;
}

/* The token table doubled (or made), every token put back. */
static int
slots_grow(void)
{
    Py_ssize_t cap = cache.cap ? 2 * cache.cap : 4096;
    Slot *slots = PyMem_Calloc((size_t)cap, sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < cache.cap; i++) {
        Slot *s = &cache.slots[i];
        if (s->len) {
            size_t j = (size_t)s->hash & (size_t)(cap - 1);
            while (slots[j].len) {
                j = (j + 1) & (size_t)(cap - 1);
            }
            slots[j] = *s;
        }
    }
    PyMem_Free(cache.slots);
    cache.slots = slots;
    cache.cap = cap;
    return 0;
}

static int
lexeme_slots_grow(void)
{
    Py_ssize_t cap = cache.lexeme_slots_cap ? 2 * cache.lexeme_slots_cap : 4096;
    LexemeSlot *slots = PyMem_Malloc((size_t)cap * sizeof(LexemeSlot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xFF, (size_t)cap * sizeof(LexemeSlot));
    for (Py_ssize_t id = 0; id < cache.lexemes_n; id++) {
        size_t j = (size_t)cache.lexeme_hash[id] & (size_t)(cap - 1);
        while (slots[j].id != -1) {
            j = (j + 1) & (size_t)(cap - 1);
        }
        slots[j].hash = cache.lexeme_hash[id];
        slots[j].id = id;
    }
    PyMem_Free(cache.lexeme_slots);
    cache.lexeme_slots = slots;
    cache.lexeme_slots_cap = cap;
    return 0;
}

/* Room for more lexemes: the four arrays indexed by lexeme id grow together. */
static int
lexemes_grow(void)
{
    Py_ssize_t cap = cache.lexemes_cap ? 2 * cache.lexemes_cap : 4096;
    PyObject **lexemes = PyMem_Realloc(cache.lexemes, (size_t)cap * sizeof(PyObject *));
    if (lexemes != NULL) {
        cache.lexemes = lexemes;
    }
    Py_hash_t *hashes = PyMem_Realloc(cache.lexeme_hash, (size_t)cap * sizeof(Py_hash_t));
    if (hashes != NULL) {
        cache.lexeme_hash = hashes;
    }
    uint32_t *stamp = PyMem_Realloc(cache.stamp, (size_t)cap * sizeof(uint32_t));
    if (stamp != NULL) {
        cache.stamp = stamp;
    }
    Py_ssize_t *row_of = PyMem_Realloc(cache.row_of, (size_t)cap * sizeof(Py_ssize_t));
    if (row_of != NULL) {
        cache.row_of = row_of;
    }
    if (lexemes == NULL || hashes == NULL || stamp == NULL || row_of == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    cache.lexemes_cap = cap;
    return 0;
}

/* The id of a lexeme (bytes), the same for equal ones; -1 with an error set. */
static Py_ssize_t
lexeme_id(PyObject *lexeme)
{
    if (!PyBytes_CheckExact(lexeme)) {
        PyErr_SetString(PyExc_TypeError, "a lexeme is bytes");
        return -1;
    }
    const char *data = PyBytes_AS_STRING(lexeme);
    Py_ssize_t len = PyBytes_GET_SIZE(lexeme);
    Py_hash_t hash = hash_bytes(data, len);
    if (2 * (cache.lexemes_n + 1) > cache.lexeme_slots_cap && lexeme_slots_grow()) {
        return -1;
    }
    size_t mask = (size_t)(cache.lexeme_slots_cap - 1);
    size_t j = (size_t)hash & mask;
    for (; cache.lexeme_slots[j].id != -1; j = (j + 1) & mask) {
        LexemeSlot *s = &cache.lexeme_slots[j];
        PyObject *known = cache.lexemes[s->id];
        if (s->hash == hash && PyBytes_GET_SIZE(known) == len &&
            memcmp(PyBytes_AS_STRING(known), data, (size_t)len) == 0) {
            return s->id;
        }
    }
    Py_ssize_t id = cache.lexemes_n;
    if (id == cache.lexemes_cap && lexemes_grow()) {
        return -1;
    }
    Py_INCREF(lexeme);
    cache.lexemes[id] = lexeme;
    cache.lexeme_hash[id] = hash;
    cache.stamp[id] = 0;
    cache.lexemes_n = id + 1;
    cache.lexeme_slots[j].hash = hash;
    cache.lexeme_slots[j].id = id;
    return id;
}

/* A split as vector.py's `_split_token` gives it (a lexeme, or its terms and width),
 * stored at the end of `terms`; its start there, or -1 with an error set. */
static Py_ssize_t
store_split(PyObject *split)
{
    Py_ssize_t start = cache.terms_len;
    if (PyBytes_CheckExact(split)) {
        Py_ssize_t id = lexeme_id(split);
        if (id < 0 || grow((void **)&cache.terms, &cache.terms_cap, start + 4,
                           sizeof(Py_ssize_t))) {
            return -1;
        }
        Py_ssize_t *t = cache.terms + start;
        t[0] = 1;
        t[1] = 1;
        t[2] = id;
        t[3] = 0;
        cache.terms_len = start + 4;
        return start;
    }
    if (!PyTuple_CheckExact(split) || PyTuple_GET_SIZE(split) != 2 ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(split, 0))) {
        PyErr_SetString(PyExc_TypeError, "a split is a lexeme or (((lexeme, offset), ...), width)");
        return -1;
    }
    PyObject *terms = PyTuple_GET_ITEM(split, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(terms);
    Py_ssize_t width = PyLong_AsSsize_t(PyTuple_GET_ITEM(split, 1));
    if ((width == -1 && PyErr_Occurred()) ||
        grow((void **)&cache.terms, &cache.terms_cap, start + 2 + 2 * n, sizeof(Py_ssize_t))) {
        return -1;
    }
    cache.terms[start] = width;
    cache.terms[start + 1] = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *term = PyTuple_GET_ITEM(terms, i);
        if (!PyTuple_CheckExact(term) || PyTuple_GET_SIZE(term) != 2) {
            PyErr_SetString(PyExc_TypeError, "a term is (lexeme, offset)");
            return -1;
        }
        Py_ssize_t id = lexeme_id(PyTuple_GET_ITEM(term, 0));
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(term, 1));
        if (id < 0 || (offset == -1 && PyErr_Occurred())) {
            return -1;
        }
        cache.terms[start + 2 + 2 * i] = id;
        cache.terms[start + 3 + 2 * i] = offset;
    }
    cache.terms_len = start + 2 + 2 * n;
    return start;
}

/* The split of a token: from the cache, else made by `split_token` (and cached when
 * it is short enough). Its start in `terms`, or -1 with an error set. */
static Py_ssize_t
token_split(const char *data, Py_ssize_t len, PyObject *split_token, Py_ssize_t cached_bytes)
{
    Py_hash_t hash = 0;
    size_t j = 0;
    if (len <= cached_bytes) {
        hash = hash_bytes(data, len);
        size_t mask = (size_t)(cache.cap - 1);
        for (j = (size_t)hash & mask; cache.slots[j].len; j = (j + 1) & mask) {
            Slot *s = &cache.slots[j];
            if (s->hash == hash && s->len == len &&
                memcmp(cache.arena + s->at, data, (size_t)len) == 0) {
                return s->split;
            }
        }
    }
    PyObject *token = PyBytes_FromStringAndSize(data, len);
    if (token == NULL) {
        return -1;
    }
    PyObject *split = PyObject_CallOneArg(split_token, token);
    Py_DECREF(token);
    if (split == NULL) {
        return -1;
    }
    Py_ssize_t start = store_split(split);
    Py_DECREF(split);
    if (start < 0 || len > cached_bytes) {
        return start;
    }
    if (grow((void **)&cache.arena, &cache.arena_cap, cache.arena_len + len, 1)) {
        return -1;
    }
    memcpy(cache.arena + cache.arena_len, data, (size_t)len);
    /* The slot found empty above is still the one to take: nothing was added since. */
    Slot *s = &cache.slots[j];
    s->hash = hash;
    s->at = cache.arena_len;
    s->split = start;
    s->len = len;
    cache.arena_len += len;
    cache.n += 1;
    if (2 * cache.n > cache.cap && slots_grow()) {
        return -1;
    }
    return start;
}

static int
gather(Gathered *g, Py_ssize_t id, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_position)
{
    /* Past the positions vector.py's `_AT` holds, an IndexError, as `_AT[pos]` raises. */
    if (pos < 0 || pos >= limit) {
        PyErr_SetString(PyExc_IndexError, "position out of range");
        return -1;
    }
    Py_ssize_t row;
    if (cache.stamp[id] == cache.call) {
        row = cache.row_of[id];
    } else {
        row = g->rows;
        if (grow((void **)&g->lexeme, &g->rows_cap, row + 1, sizeof(Py_ssize_t))) {
            return -1;
        }
        Py_ssize_t cap = g->rows_cap;
        Py_ssize_t *count = PyMem_Realloc(g->count, (size_t)cap * sizeof(Py_ssize_t));
        if (count == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->count = count;
        g->lexeme[row] = id;
        g->count[row] = 0;
        g->rows = row + 1;
        cache.stamp[id] = cache.call;
        cache.row_of[id] = row;
    }
    g->count[row] += 1;
    Py_ssize_t hit = g->hits;
    if (hit >= g->hits_cap) {
        if (grow((void **)&g->hit_row, &g->hits_cap, hit + 1, sizeof(Py_ssize_t))) {
            return -1;
        }
        uint16_t *at = PyMem_Realloc(g->hit_at, (size_t)g->hits_cap * sizeof(uint16_t));
        if (at == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->hit_at = at;
    }
    g->hit_row[hit] = row;
    g->hit_at[hit] = (uint16_t)(pos < max_position ? pos : max_position);
    g->hits = hit + 1;
    return 0;
}

static void
gathered_free(Gathered *g)
{
    PyMem_Free(g->lexeme);
    PyMem_Free(g->count);
    PyMem_Free(g->hit_row);
    PyMem_Free(g->hit_at);
}

/* {lexeme: positions} in the order lexemes were first seen, and the most positions any
 * lexeme has. */
static PyObject *
gathered_dict(Gathered *g, Py_ssize_t *most)
{
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    PyObject **where = PyMem_Calloc((size_t)(g->rows ? g->rows : 1), sizeof(PyObject *));
    Py_ssize_t *filled = PyMem_Calloc((size_t)(g->rows ? g->rows : 1), sizeof(Py_ssize_t));
    if (where == NULL || filled == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    *most = 0;
    for (Py_ssize_t row = 0; row < g->rows; row++) {
        where[row] = PyBytes_FromStringAndSize(NULL, 2 * g->count[row]);
        if (where[row] == NULL) {
            goto error;
        }
        if (g->count[row] > *most) {
            *most = g->count[row];
        }
    }
    for (Py_ssize_t hit = 0; hit < g->hits; hit++) {
        Py_ssize_t row = g->hit_row[hit];
        unsigned char *w = (unsigned char *)PyBytes_AS_STRING(where[row]) + 2 * filled[row]++;
        w[0] = (unsigned char)(g->hit_at[hit] >> 8);
        w[1] = (unsigned char)(g->hit_at[hit] & 0xFF);
    }
    for (Py_ssize_t row = 0; row < g->rows; row++) {
        if (PyDict_SetItem(out, cache.lexemes[g->lexeme[row]], where[row])) {
            goto error;
        }
    }
    for (Py_ssize_t row = 0; row < g->rows; row++) {
        Py_DECREF(where[row]);
    }
    PyMem_Free(where);
    PyMem_Free(filled);
    return out;

error:
    if (where != NULL) {
        for (Py_ssize_t row = 0; row < g->rows; row++) {
            Py_XDECREF(where[row]);
        }
    }
    PyMem_Free(where);
    PyMem_Free(filled);
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(grouped_doc,
"grouped(data, spaces, split_token, limit, max_position, cached_bytes, max_tokens)\n"
"    -> (dict, int, int) | None\n\n"
"vector.py's `_grouped`: the text's UTF-8 cut into tokens at the bytes `spaces` maps\n"
"to a space, each token split by `split_token` (once per distinct token of up to\n"
"`cached_bytes` bytes: the cache here keeps the rest), every lexeme with its positions\n"
"(two bytes each, big-endian, in text order), the position after the last, and the\n"
"most positions a lexeme has. None while another call runs.");

static PyObject *
grouped(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) ||
        PyBytes_GET_SIZE(args[1]) != 256) {
        PyErr_SetString(PyExc_TypeError,
                        "grouped(data: bytes, spaces: bytes (256), split_token, limit: int, "
                        "max_position: int, cached_bytes: int, max_tokens: int)");
        return NULL;
    }
    if (cache.busy) {
        Py_RETURN_NONE;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    const unsigned char *spaces = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    PyObject *split_token = args[2];
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    Py_ssize_t max_position = PyLong_AsSsize_t(args[4]);
    Py_ssize_t cached_bytes = PyLong_AsSsize_t(args[5]);
    Py_ssize_t max_tokens = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    /* Emptied between calls only. Lexemes and terms are bounded too: a token longer
     * than `cached_bytes` is not kept, but its split is, until the next emptying. */
    if (cache.n >= max_tokens || cache.lexemes_n >= 4 * max_tokens ||
        cache.terms_len >= 16 * max_tokens) {
        cache_clear();
    }
    if (cache.cap == 0 && slots_grow()) {
        return NULL;
    }
    cache.busy = 1;
    if (++cache.call == 0) { /* wrapped: no stamp may look current */
        if (cache.stamp != NULL) {
            memset(cache.stamp, 0, (size_t)cache.lexemes_cap * sizeof(uint32_t));
        }
        cache.call = 1;
    }
    Gathered g = {0};
    Py_ssize_t pos = 1;
    Py_ssize_t i = 0;
    while (i < size) {
        while (i < size && spaces[data[i]] == ' ') {
            i++;
        }
        Py_ssize_t start = i;
        while (i < size && spaces[data[i]] != ' ') {
            i++;
        }
        if (i == start) {
            break;
        }
        Py_ssize_t at = token_split((const char *)data + start, i - start, split_token,
                                    cached_bytes);
        if (at < 0) {
            goto error;
        }
        /* `terms` may have moved (a new split stored): read it afresh. */
        const Py_ssize_t *t = cache.terms + at;
        Py_ssize_t width = t[0], n = t[1];
        for (Py_ssize_t k = 0; k < n; k++) {
            if (gather(&g, t[2 + 2 * k], pos + t[3 + 2 * k], limit, max_position)) {
                goto error;
            }
        }
        pos += width;
    }
    Py_ssize_t most = 0;
    PyObject *vector = gathered_dict(&g, &most);
    gathered_free(&g);
    cache.busy = 0;
    if (vector == NULL) {
        return NULL;
    }
    return Py_BuildValue("(Nnn)", vector, pos, most);

error:
    gathered_free(&g);
    cache.busy = 0;
    return NULL;
}

static int
read_buffer(PyObject *value, const char **data, Py_ssize_t *size)
{
    if (PyBytes_Check(value)) {
        *data = PyBytes_AS_STRING(value);
        *size = PyBytes_GET_SIZE(value);
        return 0;
    }
    if (PyByteArray_Check(value)) {
        *data = PyByteArray_AS_STRING(value);
        *size = PyByteArray_GET_SIZE(value);
        return 0;
    }
    PyErr_SetString(PyExc_TypeError, "positions are bytes or bytearray");
    return -1;
}

PyDoc_STRVAR(binary_doc,
"binary(vector, max_position) -> bytes\n\n"
"vector.py's `_joined`: the lexeme count, then each lexeme (with its NUL), its\n"
"position count and its positions.");

static PyObject *
binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "binary(vector: dict, max_position: int)");
        return NULL;
    }
    PyObject *vector = args[0];
    Py_ssize_t max_position = PyLong_AsSsize_t(args[1]);
    if (max_position == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *lexeme, *where;
    const char *data;
    Py_ssize_t size;
    Py_ssize_t total = 4;
    Py_ssize_t at = 0;
    while (PyDict_Next(vector, &at, &lexeme, &where)) {
        if (!PyBytes_CheckExact(lexeme)) {
            PyErr_SetString(PyExc_TypeError, "lexemes are bytes");
            return NULL;
        }
        if (read_buffer(where, &data, &size)) {
            return NULL;
        }
        total += PyBytes_GET_SIZE(lexeme) + 2 + size;
    }
    Py_ssize_t count = PyDict_GET_SIZE(vector);
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    w[0] = (unsigned char)((count >> 24) & 0xFF);
    w[1] = (unsigned char)((count >> 16) & 0xFF);
    w[2] = (unsigned char)((count >> 8) & 0xFF);
    w[3] = (unsigned char)(count & 0xFF);
    w += 4;
    at = 0;
    /* Nothing between the two passes runs Python code: the dict is as it was. */
    while (PyDict_Next(vector, &at, &lexeme, &where)) {
        Py_ssize_t n = PyBytes_GET_SIZE(lexeme);
        memcpy(w, PyBytes_AS_STRING(lexeme), (size_t)n);
        w += n;
        read_buffer(where, &data, &size);
        Py_ssize_t positions = size >> 1;
        if (positions > max_position) {
            positions = max_position;
        }
        w[0] = (unsigned char)(positions >> 8);
        w[1] = (unsigned char)(positions & 0xFF);
        w += 2;
        memcpy(w, data, (size_t)size);
        w += size;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"grouped", (PyCFunction)(void (*)(void))grouped, METH_FASTCALL, grouped_doc},
    {"binary", (PyCFunction)(void (*)(void))binary, METH_FASTCALL, binary_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "app.index._vector",
    "The hot loops of app/index/vector.py, in C.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__vector(void)
{
    return PyModule_Create(&module);
}
