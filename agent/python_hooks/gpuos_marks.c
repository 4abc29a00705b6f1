/* _gpuos_marks: the Python hook's two calls into the shim (sitecustomize.py),
 * as built-in functions instead of ctypes calls.  A ctypes call converts
 * its arguments and result through ctypes' own machinery, several hundred
 * ns a call on the GPU hosts; a built-in METH_O/METH_NOARGS function costs
 * a few tens.  The hook makes two such calls around every backward pass
 * and optimizer step.
 *
 * Built against the stable ABI (Py_LIMITED_API, 3.8 on), so one
 * _gpuos_marks.abi3.so serves every CPython 3.8+ with the GIL.  Where it
 * does not load (free-threaded builds, other interpreters, no build
 * headers), sitecustomize.py falls back to ctypes.  The shim's functions
 * are found in the process (the shim is preloaded): importing fails when
 * they are not there.  Like the ctypes calls (ctypes.PyDLL), these hold the
 * GIL: the shim's push and pop never block. */
#define Py_LIMITED_API 0x03080000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

typedef int (*PushFn)(const char*);
typedef int (*PopFn)(void);

static PushFn shim_push;
static PopFn shim_pop;

/* push(label: bytes) -> int: opens a range named label on this thread. */
static PyObject* Push(PyObject* module, PyObject* label) {
  (void)module;
  const char* text = PyBytes_AsString(label);
  if (text == NULL) return NULL;
  return PyLong_FromLong(shim_push(text));
}

/* pop() -> int: closes this thread's innermost hook range. */
static PyObject* Pop(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(shim_pop());
}

static PyMethodDef kMethods[] = {
    {"push", Push, METH_O, "Opens a gpuos.python range named by the bytes argument."},
    {"pop", Pop, METH_NOARGS, "Closes the innermost gpuos.python range of this thread."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "_gpuos_marks", "gpuos-trace's Python hook marks, into the shim.", -1, kMethods,
    NULL, NULL, NULL, NULL,
};

/* Exported explicitly: before 3.9, PyMODINIT_FUNC carries no visibility and
 * the build hides every other symbol. */
__attribute__((visibility("default"))) PyMODINIT_FUNC PyInit__gpuos_marks(void) {
  shim_push = (PushFn)dlsym(RTLD_DEFAULT, "gpuos_shim_python_push");
  shim_pop = (PopFn)dlsym(RTLD_DEFAULT, "gpuos_shim_python_pop");
  if (shim_push == NULL || shim_pop == NULL) {
    PyErr_SetString(PyExc_ImportError, "the gpuos-trace shim is not in this process");
    return NULL;
  }
  return PyModule_Create(&kModule);
}
