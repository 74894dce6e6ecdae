/* A stand-in of an API-set DLL (api-ms-win-eventing-*.dll) that lacks some ETW functions.

   It exports a part of the ETW API and forwards each call to the full stand-in,
   fake_eventing.c, whose path is given at build time (-DFULL_LIBRARY="..."): the same library
   instance the tests load, so both share one state (registrations, sessions, records).  The
   functions it does not export must come from the next library of the loader's chain (the
   advapi32.dll stand-in), as on a Windows whose API-set DLL lacks them.
   Exported: EventRegister, EventUnregister, EventWriteTransfer (provider side); StartTraceW,
   ControlTraceW, OpenTraceW, CloseTrace, GetLastError (controller/consumer side).
   Missing: EventSetInformation, EventProviderEnabled, EventActivityIdControl, EnableTraceEx2,
   ProcessTrace.  fake_apiset_calls() counts the calls it forwarded. */

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef FULL_LIBRARY
#error "build with -DFULL_LIBRARY=\"/path/to/libfake_eventing.so\""
#endif

static uint32_t calls;

static void *full_symbol(const char *name) {
    static void *full;
    if (!full) full = dlopen(FULL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    void *sym = full ? dlsym(full, name) : NULL;
    if (!sym) abort(); /* a broken test set-up, never a silent success */
    __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    return sym;
}

uint32_t fake_apiset_calls(void) { return __atomic_load_n(&calls, __ATOMIC_SEQ_CST); }

typedef void (*ENABLECALLBACK)(const void *, uint32_t, uint8_t, uint64_t, uint64_t, const void *, void *);

uint32_t EventRegister(const uint8_t *provider_id, ENABLECALLBACK callback, void *context, uint64_t *handle) {
    uint32_t (*f)(const uint8_t *, ENABLECALLBACK, void *, uint64_t *) = full_symbol("EventRegister");
    return f(provider_id, callback, context, handle);
}

uint32_t EventUnregister(uint64_t handle) {
    uint32_t (*f)(uint64_t) = full_symbol("EventUnregister");
    return f(handle);
}

uint32_t EventWriteTransfer(uint64_t handle, const void *desc, const uint8_t *activity, const uint8_t *related,
                            uint32_t count, const void *data) {
    uint32_t (*f)(uint64_t, const void *, const uint8_t *, const uint8_t *, uint32_t, const void *) =
        full_symbol("EventWriteTransfer");
    return f(handle, desc, activity, related, count, data);
}

uint32_t StartTraceW(uint64_t *handle, const uint16_t *name, void *props) {
    uint32_t (*f)(uint64_t *, const uint16_t *, void *) = full_symbol("StartTraceW");
    return f(handle, name, props);
}

uint32_t ControlTraceW(uint64_t handle, const uint16_t *name, void *props, uint32_t code) {
    uint32_t (*f)(uint64_t, const uint16_t *, void *, uint32_t) = full_symbol("ControlTraceW");
    return f(handle, name, props, code);
}

uint64_t OpenTraceW(void *logfile) {
    uint64_t (*f)(void *) = full_symbol("OpenTraceW");
    return f(logfile);
}

uint32_t CloseTrace(uint64_t handle) {
    uint32_t (*f)(uint64_t) = full_symbol("CloseTrace");
    return f(handle);
}

uint32_t GetLastError(void) {
    uint32_t (*f)(void) = full_symbol("GetLastError");
    return f();
}
