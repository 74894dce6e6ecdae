/* structlog_etw.write.shapes._speedups: the optional compiled shape packer.
 *
 * What it does is what a generated shape function of structlog_etw/write/shapes/__init__.py does, for the
 * layouts whose every kind has an op here: take an event dict, check each value's exact class
 * against the layout, and return ``lead + the values' bytes`` (fixed-size values little-endian,
 * counted values as a u16 byte length and the bytes), or ``None`` when a class is not the
 * layout's.  A value of the right class that cannot be written (an int past int64, a string with
 * a lone surrogate, a counted value past 65535 bytes) raises, as the generated function does; the
 * caller then takes the general route.  tests/write/shapes/test_speedups.py holds the two byte for byte.
 *
 * It calls no Python code (no __index__, no __eq__, no encode method: exact classes only), takes
 * no lock and keeps no state besides each Program's op string, so a signal handler, another
 * thread or a fork child can always run it.  It holds a reference to each value while it packs,
 * and attaches nothing to the caller's objects (a non-ASCII string is encoded into a bytes object
 * of its own, released before it returns).  Stdlib C API only; nothing here is required: without
 * this module the package runs the generated Python functions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* Bump when an op's meaning changes: write/shapes/__init__.py uses the module only at the version it
 * knows.  The ops (code, name, op_bytes, expected_type) are write.shapes.OPS in Python:
 * tests/write/shapes/test_speedups.py parses this table and holds the two equal, and the package
 * loads no module whose OPS differ. */
#define ABI_VERSION 1

enum {
    OP_SKIP = 0,        /* a position not written (exc_info, the skipped key) */
    OP_STR = 1,         /* exact str: u16 length + UTF-8 (strict) */
    OP_BYTES = 2,       /* exact bytes: u16 length + the bytes */
    OP_I64 = 3,         /* exact int: 8 bytes, int64 */
    OP_F64 = 4,         /* exact float: 8 bytes, IEEE 754 double */
    OP_BOOL8 = 5,       /* exact bool: 1 byte, 0 or 1 */
    OP_BOOL32 = 6,      /* exact bool: 4 bytes, int32 0 or 1 */
    OP_NULL_EMPTY = 7,  /* None: u16 length 0 */
    OP_NULL_TEXT = 8,   /* None: u16 length 4 + "None" */
    OP_I64_COUNTED = 9, /* exact int: u16 length 8 + 8 bytes, int64 */
    OP_F64_COUNTED = 10,/* exact float: u16 length 8 + 8 bytes, double */
    OP_COUNT = 11
};

static const char *const op_names[OP_COUNT] = {
    "skip", "str", "bytes", "i64", "f64", "bool8", "bool32",
    "null_empty", "null_text", "i64_counted", "f64_counted",
};

/* The bytes an op writes whatever the value is: a fixed-size value's, or a counted value's u16
 * length (the body of a str or bytes is added by its length). */
static const Py_ssize_t op_bytes[OP_COUNT] = {
    [OP_SKIP] = 0, [OP_STR] = 2, [OP_BYTES] = 2, [OP_I64] = 8, [OP_F64] = 8, [OP_BOOL8] = 1,
    [OP_BOOL32] = 4, [OP_NULL_EMPTY] = 2, [OP_NULL_TEXT] = 6, [OP_I64_COUNTED] = 10,
    [OP_F64_COUNTED] = 10,
};

/* Values up to this many are held on the stack while an event is packed. */
#define STACK_VALUES 128

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;        /* positions in the layout (the event's length) */
    unsigned char *ops;  /* n op codes */
} Program;

typedef struct {
    PyObject *v;         /* the value (a strong reference while the event is packed) */
    const char *p;       /* a counted value's bytes */
    Py_ssize_t len;
    long long i;         /* an int's value */
    PyObject *owned;     /* a non-ASCII string's UTF-8 bytes, or NULL */
} Piece;

static PyTypeObject *expected_type(unsigned char op)
{
    switch (op) {
    case OP_STR: return &PyUnicode_Type;
    case OP_BYTES: return &PyBytes_Type;
    case OP_I64: case OP_I64_COUNTED: return &PyLong_Type;
    case OP_F64: case OP_F64_COUNTED: return &PyFloat_Type;
    case OP_BOOL8: case OP_BOOL32: return &PyBool_Type;
    case OP_NULL_EMPTY: case OP_NULL_TEXT: return Py_TYPE(Py_None);
    default: return NULL;
    }
}

static void put_u16(char *out, Py_ssize_t v)
{
    out[0] = (char)(v & 0xFF);
    out[1] = (char)((v >> 8) & 0xFF);
}

static void put_u64(char *out, unsigned long long v)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (char)(v & 0xFF);
        v >>= 8;
    }
}

static int put_f64(char *out, double d)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyFloat_Pack8(d, out, 1);
#else
    return _PyFloat_Pack8(d, (unsigned char *)out, 1);
#endif
}

static void too_long(Py_ssize_t len)
{
    PyErr_Format(PyExc_OverflowError, "a counted value of %zd bytes is longer than 65535", len);
}

/* Program.pack(event, *lead) -> bytes | None.  Its ops were checked when it was made (Program_init):
 * each indexes op_bytes. */
static PyObject *Program_pack(Program *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "pack() needs the event dict");
        return NULL;
    }
    PyObject *event = args[0];
    if (!PyDict_CheckExact(event)) {
        PyErr_SetString(PyExc_TypeError, "pack() takes an exact dict");
        return NULL;
    }
    Py_ssize_t n = self->n;
    Py_ssize_t size = PyDict_GET_SIZE(event);
    if (n == 0) {
        if (size != 0) {
            Py_RETURN_NONE;
        }
    }
    else if (size != n) {
        PyErr_Format(PyExc_ValueError, "the layout has %zd values, the event %zd", n, size);
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 1; i < nargs; i++) {
        if (!PyBytes_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "pack()'s leading parts are bytes");
            return NULL;
        }
        total += PyBytes_GET_SIZE(args[i]);
    }

    Piece stack_pieces[STACK_VALUES];
    Piece *pieces = stack_pieces;
    PyObject *result = NULL;
    Py_ssize_t held = 0;     /* pieces[0:held] hold their value and may own a UTF-8 copy */
    if (n > STACK_VALUES) {
        pieces = PyMem_Malloc(sizeof(Piece) * (size_t)n);
        if (pieces == NULL) {
            return PyErr_NoMemory();
        }
    }

    /* 1: every value's class first (a mismatch is None, before anything can raise).  The values
     * are held: nothing below runs Python code, but an allocation must not leave them borrowed
     * from a dict that something else could change. */
    {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        const unsigned char *ops = self->ops;
        while (held < n && PyDict_Next(event, &pos, &key, &value)) {
            unsigned char op = ops[held];
            if (op != OP_SKIP && Py_TYPE(value) != expected_type(op)) {
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            Py_INCREF(value);
            pieces[held].v = value;
            pieces[held++].owned = NULL;
        }
    }

    /* 2: sizes.  An ASCII string's bytes are its own; another string is encoded once here (a
     * bytes object of its own, released at the end: nothing is attached to the caller's str). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = pieces[i].v;
        total += op_bytes[self->ops[i]];
        switch (self->ops[i]) {
        case OP_STR: {
            Py_ssize_t len = PyUnicode_GET_LENGTH(v);
            if (len > 0xFFFF) { /* at least one byte per character */
                too_long(len);
                goto done;
            }
            if (PyUnicode_IS_COMPACT_ASCII(v)) {
                pieces[i].p = (const char *)PyUnicode_DATA(v);
            }
            else {
                PyObject *utf8 = PyUnicode_AsUTF8String(v);
                if (utf8 == NULL) {
                    goto done;
                }
                pieces[i].owned = utf8;
                pieces[i].p = PyBytes_AS_STRING(utf8);
                len = PyBytes_GET_SIZE(utf8);
                if (len > 0xFFFF) {
                    too_long(len);
                    goto done;
                }
            }
            pieces[i].len = len;
            total += len;
            break;
        }
        case OP_BYTES: {
            Py_ssize_t len = PyBytes_GET_SIZE(v);
            if (len > 0xFFFF) {
                too_long(len);
                goto done;
            }
            pieces[i].p = PyBytes_AS_STRING(v);
            pieces[i].len = len;
            total += len;
            break;
        }
        case OP_I64:
        case OP_I64_COUNTED: {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow) {
                PyErr_SetString(PyExc_OverflowError, "int past int64");
                goto done;
            }
            if (x == -1 && PyErr_Occurred()) {
                goto done;
            }
            pieces[i].i = x;
            break;
        }
        default: /* a fixed size only (op_bytes), or not written */
            break;
        }
    }

    /* 3: the bytes. */
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) {
        goto done;
    }
    {
        char *out = PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 1; i < nargs; i++) {
            Py_ssize_t len = PyBytes_GET_SIZE(args[i]);
            memcpy(out, PyBytes_AS_STRING(args[i]), (size_t)len);
            out += len;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = pieces[i].v;
            switch (self->ops[i]) {
            case OP_STR:
            case OP_BYTES:
                put_u16(out, pieces[i].len);
                memcpy(out + 2, pieces[i].p, (size_t)pieces[i].len);
                out += 2 + pieces[i].len;
                break;
            case OP_I64_COUNTED:
                put_u16(out, 8);
                out += 2;
                /* fall through */
            case OP_I64:
                put_u64(out, (unsigned long long)pieces[i].i);
                out += 8;
                break;
            case OP_F64_COUNTED:
                put_u16(out, 8);
                out += 2;
                /* fall through */
            case OP_F64:
                if (put_f64(out, PyFloat_AS_DOUBLE(v)) < 0) {
                    Py_CLEAR(result);
                    goto done;
                }
                out += 8;
                break;
            case OP_BOOL8:
                *out++ = (char)(v == Py_True);
                break;
            case OP_BOOL32:
                out[0] = (char)(v == Py_True);
                out[1] = out[2] = out[3] = 0;
                out += 4;
                break;
            case OP_NULL_EMPTY:
                put_u16(out, 0);
                out += 2;
                break;
            case OP_NULL_TEXT:
                put_u16(out, 4);
                memcpy(out + 2, "None", 4);
                out += 6;
                break;
            default:
                break;
            }
        }
    }

done:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_XDECREF(pieces[i].owned);
        Py_DECREF(pieces[i].v);
    }
    if (pieces != stack_pieces) {
        PyMem_Free(pieces);
    }
    return result;
}

static int Program_init(Program *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ops", NULL};
    const char *ops;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y#:Program", kwlist, &ops, &n)) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((unsigned char)ops[i] >= OP_COUNT) {
            PyErr_Format(PyExc_ValueError, "unknown op %d at %zd", (int)(unsigned char)ops[i], i);
            return -1;
        }
    }
    unsigned char *copy = PyMem_Malloc(n > 0 ? (size_t)n : 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, ops, (size_t)n);
    PyMem_Free(self->ops);
    self->ops = copy;
    self->n = n;
    return 0;
}

static void Program_dealloc(Program *self)
{
    PyMem_Free(self->ops);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Program_sizeof(Program *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t((Py_ssize_t)sizeof(Program) + self->n);
}

static PyMethodDef Program_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))Program_pack, METH_FASTCALL,
     "pack(event, *lead) -> bytes | None: the lead parts and the event's values packed by the "
     "program's ops; None when a value's class is not its op's."},
    {"__sizeof__", (PyCFunction)Program_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "structlog_etw.write.shapes._speedups.Program",
    .tp_doc = "Program(ops: bytes): a layout's op codes, one per position of the event dict.",
    .tp_basicsize = sizeof(Program),
    .tp_itemsize = 0,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Program_init,
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_methods = Program_methods,
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "structlog_etw.write.shapes._speedups",
    .m_doc = "The optional compiled shape packer of structlog_etw (see structlog_etw/write/shapes/__init__.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    if (PyType_Ready(&ProgramType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    PyObject *ops = PyDict_New();
    if (ops == NULL) {
        goto fail;
    }
    for (int i = 0; i < OP_COUNT; i++) {
        PyObject *code = PyLong_FromLong(i);
        if (code == NULL || PyDict_SetItemString(ops, op_names[i], code) < 0) {
            Py_XDECREF(code);
            Py_DECREF(ops);
            goto fail;
        }
        Py_DECREF(code);
    }
    if (PyModule_AddObject(m, "OPS", ops) < 0) {
        Py_DECREF(ops);
        goto fail;
    }
    if (PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        goto fail;
    }
    Py_INCREF(&ProgramType);
    if (PyModule_AddObject(m, "Program", (PyObject *)&ProgramType) < 0) {
        Py_DECREF(&ProgramType);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
