/* structlog_etw.write.shapes._speedups: the optional compiled shape packer.
 *
 * What it does is what a generated shape function of structlog_etw/write/shapes/_generate.py does, for the
 * layouts whose every kind has an op here: take an event dict, check each value's exact class
 * against the layout, and return ``lead + the values' bytes`` (fixed-size values little-endian,
 * counted values as a u16 byte length and the bytes), or ``None`` when a class is not the
 * layout's.  A value of the right class that cannot be written (an int past int64, a string with
 * a lone surrogate, a counted value past 65535 bytes) raises, as the generated function does; the
 * caller then takes the general route.  tests/write/shapes/test_speedups.py holds the two byte for byte.
 *
 * It calls no Python code (no __index__, no __eq__, no encode method: exact classes only), waits
 * for no lock of ours and keeps no state besides each Program's op string, so a signal handler,
 * another thread or a fork child can always run it.  It holds a reference to each value while it
 * packs, and attaches nothing to the caller's objects (a non-ASCII string is encoded into a bytes
 * object of its own, released before it returns).  Nothing here is required: without this module
 * the package runs the generated Python functions.
 *
 * A current extension: multi-phase initialisation with module state and a heap type (Program), so
 * every interpreter, isolated subinterpreters with their own GIL included, loads its own copy
 * (Py_mod_multiple_interpreters); free-threaded builds keep the GIL off when it is imported
 * (Py_mod_gil, with the reasoning beside it below).  Public C API only (the limited API's
 * PyFloat_Pack8 from 3.11, a portable packer before), compiled warning-free with -Wall -Wextra
 * -Werror against the headers of every Python it supports (tests/write/shapes/test_speedups_extension.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stddef.h>
#include <string.h>

/* Bump when an op's meaning changes: write/shapes/_generate.py uses the module only at the version it
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

/* A Program is immutable: its ops are set once, by Program() (tp_new), and stored inline (a
 * var-sized object, one byte per position).  There is no __init__ to run again on a live object,
 * so no thread can see its ops change or freed while it packs. */
typedef struct {
    PyObject_VAR_HEAD     /* ob_size: positions in the layout (the event's length) */
    unsigned char ops[1]; /* ob_size op codes (and one spare byte) */
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

/* A double as IEEE 754 binary64, little-endian: PyFloat_Pack8 where the C API has it (3.11+);
 * before, the double's own bits, which is what the private packer did on every platform CPython
 * builds on (IEEE 754 doubles, checked below at compile time).  Both copy a NaN's payload as is,
 * as struct.pack("<d") does (tests/write/shapes/test_speedups.py holds the bytes equal). */
#if PY_VERSION_HEX >= 0x030B0000
static int put_f64(char *out, double d)
{
    return PyFloat_Pack8(d, out, 1);
}
#else
typedef char double_is_binary64[(sizeof(double) == 8 && DBL_MANT_DIG == 53 && FLT_RADIX == 2) ? 1 : -1];

static int put_f64(char *out, double d)
{
    unsigned long long bits;
    memcpy(&bits, &d, sizeof bits);
    put_u64(out, bits);
    return 0;
}
#endif

static void too_long(Py_ssize_t len)
{
    PyErr_Format(PyExc_OverflowError, "a counted value of %zd bytes is longer than 65535", len);
}

/* Step 1 of pack: every value's class against its op, in the dict's order, each value taken as a
 * strong reference into pieces[0:*held].  The dict's length is read here too, so that both
 * happen under the dict's critical section on a free-threaded build (Py_BEGIN_CRITICAL_SECTION:
 * another thread cannot change the dict between the length and the last value; on a build with
 * the GIL it is a plain block, and nothing here runs Python code or releases the GIL).  After it
 * the values are ours: what follows reads only immutable objects we hold.
 * Returns 1 (all held), 0 (a class is not its op's, or an empty layout and a non-empty event:
 * None), -1 (another length: raised). */
static int hold_values(const Program *self, PyObject *event, Piece *pieces, Py_ssize_t *held)
{
    int outcome = 1;
    Py_ssize_t n = Py_SIZE(self);
    const unsigned char *ops = self->ops;
    Py_ssize_t size;
#ifdef Py_BEGIN_CRITICAL_SECTION
    Py_BEGIN_CRITICAL_SECTION(event);
#endif
    size = PyDict_GET_SIZE(event);
    if (size != n) {
        outcome = n == 0 ? 0 : -1;
    }
    else {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (*held < n && PyDict_Next(event, &pos, &key, &value)) {
            unsigned char op = ops[*held];
            if (op != OP_SKIP && Py_TYPE(value) != expected_type(op)) {
                outcome = 0;
                break;
            }
            Py_INCREF(value);
            pieces[*held].v = value;
            pieces[(*held)++].owned = NULL;
        }
    }
#ifdef Py_BEGIN_CRITICAL_SECTION
    Py_END_CRITICAL_SECTION();
#endif
    if (outcome < 0) {
        PyErr_Format(PyExc_ValueError, "the layout has %zd values, the event %zd", n, size);
    }
    return outcome;
}

/* Program.pack(event, *lead) -> bytes | None.  Its ops were checked when it was made (Program_new):
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
    Py_ssize_t n = Py_SIZE(self);
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

    /* 1: every value's class first (a mismatch is None, before anything can raise), each value
     * held (hold_values). */
    switch (hold_values(self, event, pieces, &held)) {
    case 0:
        result = Py_None;
        Py_INCREF(result);
        goto done;
    case -1:
        goto done;
    default:
        break;
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

/* Program(ops: bytes): checked and copied once, here; the object is immutable afterwards. */
static PyObject *Program_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ops", NULL};
    const char *ops;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y#:Program", kwlist, &ops, &n)) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((unsigned char)ops[i] >= OP_COUNT) {
            PyErr_Format(PyExc_ValueError, "unknown op %d at %zd", (int)(unsigned char)ops[i], i);
            return NULL;
        }
    }
    Program *self = (Program *)type->tp_alloc(type, n);
    if (self == NULL) {
        return NULL;
    }
    memcpy(self->ops, ops, (size_t)n);
    return (PyObject *)self;
}

/* A heap type's instance holds a reference to its type (a module of each interpreter has its
 * own), released with the instance. */
static void Program_dealloc(Program *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *Program_sizeof(Program *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(Py_TYPE(self)->tp_basicsize + Py_SIZE(self));
}

static PyMethodDef Program_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))Program_pack, METH_FASTCALL,
     "pack(event, *lead) -> bytes | None: the lead parts and the event's values packed by the "
     "program's ops; None when a value's class is not its op's."},
    {"__sizeof__", (PyCFunction)(void (*)(void))Program_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Program_slots[] = {
    {Py_tp_doc, "Program(ops: bytes): a layout's op codes, one per position of the event dict "
                "(immutable: set once, when it is made)."},
    {Py_tp_new, (void *)Program_new},
    {Py_tp_dealloc, (void *)Program_dealloc},
    {Py_tp_methods, Program_methods},
    {0, NULL},
};

/* A heap type made per module object (PyType_FromModuleAndSpec), so each interpreter has its own;
 * immutable (no attribute can be set on it: it is shared by nothing, changed by no one) and not
 * subclassable.  Var-sized: the ops are stored inline, one byte each. */
static PyType_Spec Program_spec = {
    .name = "structlog_etw.write.shapes._speedups.Program",
    .basicsize = (int)offsetof(Program, ops),
    .itemsize = 1,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Program_slots,
};

/* The module's state: its Program type (a strong reference, visited and cleared with the module). */
typedef struct {
    PyTypeObject *program_type;
} speedups_state;

static speedups_state *get_state(PyObject *module)
{
    return (speedups_state *)PyModule_GetState(module);
}

static int speedups_exec(PyObject *module)
{
    speedups_state *state = get_state(module);
    state->program_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Program_spec, NULL);
    if (state->program_type == NULL) {
        return -1;
    }
    if (PyModule_AddType(module, state->program_type) < 0) {
        return -1;
    }
    PyObject *ops = PyDict_New();
    if (ops == NULL) {
        return -1;
    }
    for (int i = 0; i < OP_COUNT; i++) {
        PyObject *code = PyLong_FromLong(i);
        if (code == NULL || PyDict_SetItemString(ops, op_names[i], code) < 0) {
            Py_XDECREF(code);
            Py_DECREF(ops);
            return -1;
        }
        Py_DECREF(code);
    }
    int added = PyModule_AddObjectRef(module, "OPS", ops);
    Py_DECREF(ops);
    if (added < 0) {
        return -1;
    }
    return PyModule_AddIntConstant(module, "ABI_VERSION", ABI_VERSION);
}

static int speedups_traverse(PyObject *module, visitproc visit, void *arg)
{
    speedups_state *state = get_state(module);
    Py_VISIT(state->program_type);
    return 0;
}

static int speedups_clear(PyObject *module)
{
    speedups_state *state = get_state(module);
    Py_CLEAR(state->program_type);
    return 0;
}

static void speedups_free(void *module)
{
    (void)speedups_clear((PyObject *)module);
}

static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, (void *)speedups_exec},
#ifdef Py_MOD_PER_INTERPRETER_GIL_SUPPORTED
    /* 3.12+: each interpreter gets its own module object, Program type and OPS dict (module state,
     * multi-phase initialisation); the C code has no static mutable data (its tables are const),
     * so interpreters with their own GIL can load it at once. */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil
    /* 3.13+ free-threaded builds: importing this module does not turn the GIL back on.  Why that
     * is safe without the GIL:
     * - shared state: none.  The C statics are const tables; a Program's ops are written once,
     *   in Program() before anyone else can see the object, and never again (no __init__ to
     *   re-run); the module's state (its type) is set in exec, before the module is published.
     * - the caller's dict: its length and values are read under the dict's own critical section
     *   (hold_values), each value taken as a strong reference there; another thread changing
     *   the dict meanwhile waits for that section, or is seen whole before it.
     * - the values: after that, pack reads only what it holds, and only immutable objects of
     *   exact builtin classes (str, bytes, int, float, bool, None: checked with Py_TYPE, no
     *   Python code called), so no other thread can change a byte it reads.
     * - what it writes: its own stack or PyMem buffers, its own new bytes objects (the result,
     *   and a non-ASCII string's UTF-8 copy, released before it returns); nothing is attached
     *   to a caller's object (PyUnicode_AsUTF8String, not PyUnicode_AsUTF8AndSize). */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "structlog_etw.write.shapes._speedups",
    .m_doc = "The optional compiled shape packer of structlog_etw (see structlog_etw/write/shapes/_generate.py).",
    .m_size = sizeof(speedups_state),
    .m_slots = speedups_slots,
    .m_traverse = speedups_traverse,
    .m_clear = speedups_clear,
    .m_free = speedups_free,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
