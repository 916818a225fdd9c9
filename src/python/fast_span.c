/* liveprof._fast: the span object of `with liveprof.scope(name):` in C, for
 * the hot path (docs/python.md), and hook_end, with which liveprof run's
 * hooks measure their own time. Optional: the package works without it
 * (liveprof/_native.py's pure-Python Span over ctypes), and uses it when it
 * imports.
 *
 * Built against Python's stable ABI (Py_LIMITED_API, 3.9): one build of
 * _fast.abi3.so imports in every CPython 3.9+, as libliveprof.so serves them
 * all. It is not linked to libliveprof.so: _native hands it the addresses of
 * the C ABI's span functions (liveprof_c.h) from the library it loaded
 * itself (init()), so a process never holds two copies of the library.
 *
 * What a `with` costs here: scope(name) looks the name's id up in a dict
 * (filled by _native, which interns new names) and allocates a small object
 * that is not tracked by the garbage collector; __enter__ and __exit__ are
 * one C call each into the library.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef uint32_t (*BeginFn)(uint32_t name);
typedef uint32_t (*InputBeginFn)(uint32_t name, int stage);
typedef void (*EndFn)(uint32_t handle);
typedef uint64_t (*HookEndFn)(uint64_t since);

static BeginFn g_scope_begin;
static InputBeginFn g_input_begin;
static EndFn g_span_end;
static HookEndFn g_hook_end;  /* NULL: init() was given none */
static PyObject* g_names;     /* dict str -> int: _native's name cache */
static PyObject* g_name_slow; /* _native._name_id_slow(name) -> int: interns and caches */
static PyObject* g_name_text; /* _native._name_text(id) -> str: for repr */
static PyTypeObject* g_span_type;

static int Ready(void) {
  if (g_names != NULL) return 1;
  PyErr_SetString(PyExc_RuntimeError, "liveprof._fast: init() was not called (import liveprof instead)");
  return 0;
}

typedef struct {
  PyObject_HEAD int64_t handle; /* -1: not entered; 0: entered, not recording; else the library's handle */
  uint32_t name;
  int32_t stage; /* -1: a scope; else an input span of this stage */
} Span;

static PyObject* SpanEnter(PyObject* self, PyObject* unused) {
  Span* s = (Span*)self;
  (void)unused;
  if (!Ready()) return NULL;
  if (s->handle != -1) {
    PyErr_SetString(PyExc_RuntimeError, "liveprof: this span is already open (one `with` at a time per object)");
    return NULL;
  }
  s->handle = s->stage < 0 ? g_scope_begin(s->name) : g_input_begin(s->name, s->stage);
  Py_INCREF(self);
  return self;
}

static PyObject* SpanExit(PyObject* self, PyObject* args) {
  Span* s = (Span*)self;
  (void)args;
  if (s->handle > 0) g_span_end((uint32_t)s->handle);
  s->handle = -1;
  Py_RETURN_FALSE; /* an exception raised inside the `with` goes on */
}

static PyObject* SpanRepr(PyObject* self) {
  Span* s = (Span*)self;
  PyObject* name = PyObject_CallFunction(g_name_text, "I", (unsigned int)s->name);
  if (name == NULL) return NULL;
  PyObject* repr = PyUnicode_FromFormat("<liveprof.%s %R%s>", s->stage < 0 ? "scope" : "input", name,
                                        s->handle != -1 ? " (open)" : "");
  Py_DECREF(name);
  return repr;
}

static void SpanDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type); /* a heap type: each instance holds a reference to it */
}

static PyMethodDef kSpanMethods[] = {
    {"__enter__", SpanEnter, METH_NOARGS, "Begins the span (if recording is on for its kind)."},
    {"__exit__", SpanExit, METH_VARARGS, "Ends the span and records it."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kSpanSlots[] = {
    {Py_tp_dealloc, (void*)SpanDealloc},
    {Py_tp_repr, (void*)SpanRepr},
    {Py_tp_methods, kSpanMethods},
    {Py_tp_doc, (void*)"A span: use it once at a time in a `with` statement (liveprof.scope, liveprof.input)."},
    {0, NULL},
};

static PyType_Spec kSpanSpec = {"liveprof._fast.Span", sizeof(Span), 0, Py_TPFLAGS_DEFAULT, kSpanSlots};

static PyObject* NewSpan(uint32_t name, int32_t stage) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(g_span_type, Py_tp_alloc);
  Span* s = (Span*)alloc(g_span_type, 0);
  if (s == NULL) return NULL;
  s->handle = -1;
  s->name = name;
  s->stage = stage;
  return (PyObject*)s;
}

/* The id of `name` from _native's cache, else from _native (which interns,
 * caches, and raises TypeError for a name that is not a str). */
static int NameId(PyObject* name, uint32_t* id) {
  PyObject* cached = PyDict_GetItemWithError(g_names, name); /* borrowed */
  PyObject* owned = NULL;
  if (cached == NULL) {
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
      PyErr_Clear(); /* (unhashable: _name_id_slow says what it must be) */
    }
    owned = PyObject_CallFunctionObjArgs(g_name_slow, name, NULL);
    if (owned == NULL) return -1;
    cached = owned;
  }
  const unsigned long v = PyLong_AsUnsignedLong(cached);
  Py_XDECREF(owned);
  if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
  *id = (uint32_t)v;
  return 0;
}

static PyObject* Scope(PyObject* module, PyObject* name) {
  (void)module;
  uint32_t id;
  if (!Ready()) return NULL;
  if (NameId(name, &id) != 0) return NULL;
  return NewSpan(id, -1);
}

static PyObject* InputSpan(PyObject* module, PyObject* args) {
  (void)module;
  unsigned int id;
  int stage;
  if (!Ready() || !PyArg_ParseTuple(args, "Ii", &id, &stage)) return NULL;
  return NewSpan(id, stage);
}

/* liveprof's hooks measure their own bodies (liveprof_c.h's
 * liveprof_hook_end): hook_end(since) -> the clock now, the time since
 * `since` added to the process's hook time. What the measuring costs a hook
 * is this call: no ctypes conversion. */
static PyObject* HookEnd(PyObject* module, PyObject* since) {
  (void)module;
  if (g_hook_end == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "liveprof._fast: init() was given no hook_end");
    return NULL;
  }
  const unsigned long long s = PyLong_AsUnsignedLongLong(since);
  if (s == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  return PyLong_FromUnsignedLongLong(g_hook_end(s));
}

static PyObject* Init(PyObject* module, PyObject* args) {
  (void)module;
  unsigned long long begin, input_begin, end, hook_end = 0;
  PyObject *names, *slow, *text;
  if (!PyArg_ParseTuple(args, "KKKOOO|K", &begin, &input_begin, &end, &names, &slow, &text, &hook_end)) return NULL;
  if (begin == 0 || input_begin == 0 || end == 0 || !PyDict_Check(names) || !PyCallable_Check(slow) ||
      !PyCallable_Check(text)) {
    PyErr_SetString(PyExc_ValueError, "liveprof._fast.init: three function addresses, a dict, two callables");
    return NULL;
  }
  g_scope_begin = (BeginFn)(uintptr_t)begin;
  g_input_begin = (InputBeginFn)(uintptr_t)input_begin;
  g_span_end = (EndFn)(uintptr_t)end;
  g_hook_end = (HookEndFn)(uintptr_t)hook_end;
  Py_INCREF(names);
  Py_INCREF(slow);
  Py_INCREF(text);
  Py_XDECREF(g_names);
  Py_XDECREF(g_name_slow);
  Py_XDECREF(g_name_text);
  g_names = names;
  g_name_slow = slow;
  g_name_text = text;
  Py_RETURN_NONE;
}

static PyMethodDef kFunctions[] = {
    {"init", Init, METH_VARARGS,
     "init(scope_begin, input_begin, span_end, names, name_id_slow, name_text[, hook_end]): the "
     "library's span functions (addresses), the name cache and its helpers, and liveprof_hook_end."},
    {"hook_end", HookEnd, METH_O, "hook_end(since) -> now: a hook's body measured (liveprof_hook_end)."},
    {"scope", Scope, METH_O, "scope(name) -> a span for `with` (a user scope)."},
    {"input_span", InputSpan, METH_VARARGS, "input_span(name_id, stage) -> an input span for `with`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                                     "_fast",
                                     "liveprof's span object in C (optional; docs/python.md).",
                                     -1,
                                     kFunctions,
                                     NULL,
                                     NULL,
                                     NULL,
                                     NULL};

PyMODINIT_FUNC PyInit__fast(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m == NULL) return NULL;
  g_span_type = (PyTypeObject*)PyType_FromSpec(&kSpanSpec);
  if (g_span_type == NULL) {
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(g_span_type);
  if (PyModule_AddObject(m, "Span", (PyObject*)g_span_type) < 0) {
    Py_DECREF(g_span_type);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
