/* structlog_etw._speedups: the optional compiled accelerator.
 *
 * Placeholder for the build wiring: a module with one attribute, ABI_VERSION = 1.  The real
 * module replaces this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "structlog_etw._speedups",
    "Optional compiled accelerator of structlog_etw (placeholder).",
    -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ABI_VERSION", 1) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
