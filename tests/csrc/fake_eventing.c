/*
 * A stand-in for the Windows ETW provider API (advapi32 / api-ms-win-eventing-provider),
 * compiled by the tests with gcc so that structlog_etw._backend_windows runs its real ctypes
 * code on Linux.  Same entry points and the Windows x64 data layouts (ULONG = uint32_t,
 * REGHANDLE = uint64_t, EVENT_DESCRIPTOR, EVENT_DATA_DESCRIPTOR); plain C calling convention.
 *
 * It records everything it receives and exposes it through fake_* functions; it calls the
 * enable callback from another thread (also during EventRegister, before the handle is
 * returned), and lets tests set the session state and force EventWriteTransfer's result.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint16_t Id;
    uint8_t Version;
    uint8_t Channel;
    uint8_t Level;
    uint8_t Opcode;
    uint16_t Task;
    uint64_t Keyword;
} EVENT_DESCRIPTOR;

typedef struct {
    uint64_t Ptr;
    uint32_t Size;
    uint8_t Type;
    uint8_t Reserved1;
    uint16_t Reserved2;
} EVENT_DATA_DESCRIPTOR;

typedef void (*ENABLECALLBACK)(const void *source_id, uint32_t is_enabled, uint8_t level,
                               uint64_t match_any, uint64_t match_all, void *filter, void *context);

_Static_assert(sizeof(EVENT_DESCRIPTOR) == 16, "EVENT_DESCRIPTOR is 16 bytes");
_Static_assert(sizeof(EVENT_DATA_DESCRIPTOR) == 16, "EVENT_DATA_DESCRIPTOR is 16 bytes");

#define MAX_PROVIDERS 64
#define MAX_DESCRIPTORS 8
#define HANDLE_BASE 0xA5A5000000000000ULL /* needs all 64 bits: catches a truncated REGHANDLE */

#define ERROR_INVALID_HANDLE 6
#define ERROR_INVALID_PARAMETER 87

typedef struct {
    int live;
    uint8_t guid[16];
    ENABLECALLBACK callback;
    void *context;
} provider_t;

typedef struct {
    uint64_t handle;
    EVENT_DESCRIPTOR desc;
    int has_activity, has_related;
    uint8_t activity[16], related[16];
    uint32_t count; /* descriptors passed */
    uint32_t result;
    EVENT_DATA_DESCRIPTOR dd[MAX_DESCRIPTORS];
    uint8_t *bytes[MAX_DESCRIPTORS];
} record_t;

typedef struct {
    uint64_t handle;
    uint32_t info_class;
    uint32_t size;
    uint8_t *blob;
} setinfo_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static provider_t providers[MAX_PROVIDERS];
static record_t *records;
static size_t nrecords, caprecords;
static setinfo_t setinfos[MAX_PROVIDERS * 4];
static size_t nsetinfos;
static uint32_t write_result;
static uint32_t unregister_calls;
static uint32_t callback_calls;
static uint64_t last_callback_thread, last_register_thread;

/* the session state the next callbacks report */
static uint32_t state_enabled;
static uint8_t state_level;
static uint64_t state_any, state_all;

static __thread uint8_t thread_activity[16];
static uint64_t activity_counter;

typedef struct {
    provider_t prov;
    uint32_t is_enabled;
    uint8_t level;
    uint64_t any, all;
} call_t;

static void *callback_thread(void *arg) {
    call_t *c = (call_t *)arg;
    __atomic_store_n(&last_callback_thread, (uint64_t)pthread_self(), __ATOMIC_SEQ_CST);
    c->prov.callback(c->prov.guid, c->is_enabled, c->level, c->any, c->all, NULL, c->prov.context);
    __atomic_add_fetch(&callback_calls, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Call one provider's callback on a new thread and wait for it (lock NOT held). */
static void call_on_thread(provider_t prov, uint32_t is_enabled, uint8_t level, uint64_t any, uint64_t all) {
    if (!prov.callback) return;
    call_t c = {prov, is_enabled, level, any, all};
    pthread_t t;
    if (pthread_create(&t, NULL, callback_thread, &c) != 0) return;
    pthread_join(t, NULL);
}

static int slot_of(uint64_t handle) {
    if (handle < HANDLE_BASE + 1 || handle > HANDLE_BASE + MAX_PROVIDERS) return -1;
    int i = (int)(handle - HANDLE_BASE - 1);
    return providers[i].live ? i : -1;
}

/* ---- the ETW provider API ---------------------------------------------------------------- */

uint32_t EventRegister(const uint8_t *provider_id, ENABLECALLBACK callback, void *context, uint64_t *handle) {
    if (!provider_id || !handle) return ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    int i;
    for (i = 0; i < MAX_PROVIDERS && providers[i].live; i++) {
    }
    if (i == MAX_PROVIDERS) {
        pthread_mutex_unlock(&lock);
        return 8; /* ERROR_NOT_ENOUGH_MEMORY */
    }
    providers[i].live = 1;
    memcpy(providers[i].guid, provider_id, 16);
    providers[i].callback = callback;
    providers[i].context = context;
    provider_t prov = providers[i];
    uint32_t en = state_enabled;
    uint8_t lv = state_level;
    uint64_t any = state_any, all = state_all;
    last_register_thread = (uint64_t)pthread_self();
    pthread_mutex_unlock(&lock);
    /* Like ETW when a session already waits for the provider: the callback runs (here on another
       thread) before EventRegister has returned the handle.  We always call it, with the
       current state (IsEnabled 0 when no session is enabled). */
    call_on_thread(prov, en, lv, any, all);
    *handle = HANDLE_BASE + 1 + (uint64_t)i;
    return 0;
}

uint32_t EventUnregister(uint64_t handle) {
    pthread_mutex_lock(&lock);
    unregister_calls++;
    int i = slot_of(handle);
    if (i < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    providers[i].live = 0;
    providers[i].callback = NULL;
    pthread_mutex_unlock(&lock);
    return 0;
}

uint32_t EventSetInformation(uint64_t handle, uint32_t info_class, const void *info, uint32_t size) {
    pthread_mutex_lock(&lock);
    if (slot_of(handle) < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    if (nsetinfos < sizeof setinfos / sizeof setinfos[0]) {
        setinfo_t *s = &setinfos[nsetinfos++];
        s->handle = handle;
        s->info_class = info_class;
        s->size = size;
        s->blob = malloc(size ? size : 1);
        if (s->blob && size) memcpy(s->blob, info, size);
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

uint32_t EventWriteTransfer(uint64_t handle, const EVENT_DESCRIPTOR *desc, const uint8_t *activity,
                            const uint8_t *related, uint32_t count, const EVENT_DATA_DESCRIPTOR *data) {
    pthread_mutex_lock(&lock);
    if (slot_of(handle) < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    if (!desc || count > MAX_DESCRIPTORS || (count && !data)) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_PARAMETER;
    }
    if (nrecords == caprecords) {
        size_t cap = caprecords ? caprecords * 2 : 64;
        record_t *r = realloc(records, cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&lock);
            return 8;
        }
        records = r;
        caprecords = cap;
    }
    record_t *r = &records[nrecords++];
    memset(r, 0, sizeof *r);
    r->handle = handle;
    r->desc = *desc;
    if (activity) {
        r->has_activity = 1;
        memcpy(r->activity, activity, 16);
    }
    if (related) {
        r->has_related = 1;
        memcpy(r->related, related, 16);
    }
    r->count = count;
    r->result = write_result;
    for (uint32_t j = 0; j < count; j++) {
        r->dd[j] = data[j];
        r->bytes[j] = malloc(data[j].Size ? data[j].Size : 1);
        if (r->bytes[j] && data[j].Size) memcpy(r->bytes[j], (const void *)(uintptr_t)data[j].Ptr, data[j].Size);
    }
    uint32_t result = write_result;
    pthread_mutex_unlock(&lock);
    return result;
}

uint32_t EventActivityIdControl(uint32_t code, uint8_t *id) {
    uint8_t fresh[16];
    if (!id) return ERROR_INVALID_PARAMETER;
    switch (code) {
        case 1: /* GET */
            memcpy(id, thread_activity, 16);
            return 0;
        case 2: /* SET */
            memcpy(thread_activity, id, 16);
            return 0;
        case 3: /* CREATE */
        case 5: { /* CREATE_SET: new id on the thread, previous one returned */
            uint64_t n = __atomic_add_fetch(&activity_counter, 1, __ATOMIC_SEQ_CST);
            memset(fresh, 0, 16);
            memcpy(fresh, &n, 8);
            fresh[15] = 0xAC;
            if (code == 3) {
                memcpy(id, fresh, 16);
            } else {
                memcpy(id, thread_activity, 16);
                memcpy(thread_activity, fresh, 16);
            }
            return 0;
        }
        case 4: /* GET_SET */
            memcpy(fresh, thread_activity, 16);
            memcpy(thread_activity, id, 16);
            memcpy(id, fresh, 16);
            return 0;
        default:
            return ERROR_INVALID_PARAMETER;
    }
}

uint8_t EventProviderEnabled(uint64_t handle, uint8_t level, uint64_t keyword) {
    pthread_mutex_lock(&lock);
    int ok = slot_of(handle) >= 0 && state_enabled;
    unsigned level_plus1 = state_level == 0 ? 256u : (unsigned)state_level + 1u;
    ok = ok && level < level_plus1 &&
         (keyword == 0 || ((state_any == 0 || (keyword & state_any)) && (keyword & state_all) == state_all));
    pthread_mutex_unlock(&lock);
    return (uint8_t)ok;
}

/* ---- test-only controls and inspection --------------------------------------------------- */

/* Set the session state and call every live provider's callback (each on a new thread).
   is_enabled 2 (capture state) is delivered but does not change the remembered state. */
void fake_enable(uint8_t level, uint64_t any, uint64_t all, uint32_t is_enabled) {
    provider_t live[MAX_PROVIDERS];
    int n = 0;
    pthread_mutex_lock(&lock);
    if (is_enabled != 2) {
        state_enabled = is_enabled;
        state_level = level;
        state_any = any;
        state_all = all;
    }
    for (int i = 0; i < MAX_PROVIDERS; i++)
        if (providers[i].live) live[n++] = providers[i];
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) call_on_thread(live[i], is_enabled, level, any, all);
}

void fake_set_write_result(uint32_t code) {
    pthread_mutex_lock(&lock);
    write_result = code;
    pthread_mutex_unlock(&lock);
}

void fake_reset(void) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nrecords; i++)
        for (int j = 0; j < MAX_DESCRIPTORS; j++) free(records[i].bytes[j]);
    nrecords = 0;
    for (size_t i = 0; i < nsetinfos; i++) free(setinfos[i].blob);
    nsetinfos = 0;
    write_result = 0;
    state_enabled = 0;
    state_level = 0;
    state_any = state_all = 0;
    unregister_calls = 0;
    callback_calls = 0;
    pthread_mutex_unlock(&lock);
}

uint32_t fake_record_count(void) {
    pthread_mutex_lock(&lock);
    uint32_t n = (uint32_t)nrecords;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Copies record i's header: handle, 16-byte EVENT_DESCRIPTOR, activity/related (if any),
   descriptor count and the result returned.  Returns 0, or -1 if i is out of range. */
int fake_get_record(uint32_t i, uint64_t *handle, uint8_t *desc16, int *has_activity, uint8_t *activity16,
                    int *has_related, uint8_t *related16, uint32_t *count, uint32_t *result) {
    pthread_mutex_lock(&lock);
    if (i >= nrecords) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    record_t *r = &records[i];
    *handle = r->handle;
    memcpy(desc16, &r->desc, 16);
    *has_activity = r->has_activity;
    memcpy(activity16, r->activity, 16);
    *has_related = r->has_related;
    memcpy(related16, r->related, 16);
    *count = r->count;
    *result = r->result;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Record i's data descriptor j: Type, Reserved1, Reserved2, and up to cap bytes copied into buf.
   Returns the descriptor's Size, or -1 if out of range. */
int64_t fake_get_data(uint32_t i, uint32_t j, uint8_t *type, uint8_t *reserved1, uint16_t *reserved2,
                      uint8_t *buf, uint32_t cap) {
    pthread_mutex_lock(&lock);
    if (i >= nrecords || j >= records[i].count) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    record_t *r = &records[i];
    *type = r->dd[j].Type;
    *reserved1 = r->dd[j].Reserved1;
    *reserved2 = r->dd[j].Reserved2;
    uint32_t size = r->dd[j].Size;
    if (buf && r->bytes[j]) memcpy(buf, r->bytes[j], size < cap ? size : cap);
    pthread_mutex_unlock(&lock);
    return size;
}

uint32_t fake_setinfo_count(void) {
    pthread_mutex_lock(&lock);
    uint32_t n = (uint32_t)nsetinfos;
    pthread_mutex_unlock(&lock);
    return n;
}

/* SetInformation call i: handle, class, up to cap bytes of the blob.  Returns its size or -1. */
int64_t fake_get_setinfo(uint32_t i, uint64_t *handle, uint32_t *info_class, uint8_t *buf, uint32_t cap) {
    pthread_mutex_lock(&lock);
    if (i >= nsetinfos) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    setinfo_t *s = &setinfos[i];
    *handle = s->handle;
    *info_class = s->info_class;
    if (buf && s->blob) memcpy(buf, s->blob, s->size < cap ? s->size : cap);
    int64_t size = s->size;
    pthread_mutex_unlock(&lock);
    return size;
}

/* The GUID (16 bytes as passed, i.e. GUID struct layout) of the live provider with this handle. */
int fake_provider_guid(uint64_t handle, uint8_t *guid16) {
    pthread_mutex_lock(&lock);
    int i = slot_of(handle);
    if (i >= 0) memcpy(guid16, providers[i].guid, 16);
    pthread_mutex_unlock(&lock);
    return i < 0 ? -1 : 0;
}

uint32_t fake_unregister_calls(void) { return __atomic_load_n(&unregister_calls, __ATOMIC_SEQ_CST); }
uint32_t fake_callback_calls(void) { return __atomic_load_n(&callback_calls, __ATOMIC_SEQ_CST); }

/* Nonzero when the last callback ran on a thread other than the last EventRegister caller. */
int fake_last_callback_on_other_thread(void) {
    return __atomic_load_n(&last_callback_thread, __ATOMIC_SEQ_CST) != last_register_thread;
}

/* Number of providers registered and not yet unregistered. */
uint32_t fake_live_providers(void) {
    uint32_t n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PROVIDERS; i++) n += providers[i].live ? 1u : 0u;
    pthread_mutex_unlock(&lock);
    return n;
}
