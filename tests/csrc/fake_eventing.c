/*
 * A stand-in for the Windows ETW provider API (advapi32 / api-ms-win-eventing-provider),
 * compiled by the tests with gcc so that structlog_etw._backend_windows runs its real ctypes
 * code on Linux.  Same entry points and the Windows x64 data layouts (ULONG = uint32_t,
 * REGHANDLE = uint64_t, EVENT_DESCRIPTOR, EVENT_DATA_DESCRIPTOR); plain C calling convention.
 *
 * It records everything it receives and exposes it through fake_* functions; it calls the
 * enable callback from another thread (also during EventRegister, before the handle is
 * returned), and lets tests set the session state and force EventWriteTransfer's result.
 *
 * It also emulates real-time sessions, the controller and consumer API of advapi32
 * (StartTraceW, ControlTraceW, EnableTraceEx2, OpenTraceW, ProcessTrace, CloseTrace,
 * GetLastError): events written by a provider that a session enabled (and that pass the
 * session's level and keyword filter) are queued in the session and delivered by ProcessTrace
 * to the EventRecordCallback as EVENT_RECORDs, with the TraceLogging metadata in the extended
 * data item EVENT_HEADER_EXT_TYPE_EVENT_SCHEMA_TL, the provider traits in PROV_TRAITS and the
 * related activity id in RELATED_ACTIVITYID, as ETW does.  The structures are declared as in
 * the Windows SDK headers (evntrace.h, evntcons.h) for x64, their sizes and offsets asserted
 * below, and the fields are read and written where the SDK puts them: a caller whose layout
 * differs reads or passes wrong values.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#endif

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

#define MAX_PROVIDERS 1024 /* every live provider of the test process is routed to a factory (registry) */
#define MAX_DESCRIPTORS 8
#define HANDLE_BASE 0xA5A5000000000000ULL /* needs all 64 bits: catches a truncated REGHANDLE */

#define ERROR_INVALID_HANDLE 6
#define ERROR_INVALID_PARAMETER 87

typedef struct {
    int live;
    uint8_t guid[16];
    ENABLECALLBACK callback;
    void *context;
    int traits_set; /* EventSetInformation(EventProviderSetTraits) was called */
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

/* ---- the controller/consumer structures (Windows SDK, x64) -------------------------------- */

typedef struct {
    uint32_t Data1;
    uint16_t Data2, Data3;
    uint8_t Data4[8];
} GUID_T;

typedef struct { /* wmistr.h */
    uint32_t BufferSize;
    uint32_t ProviderId;
    uint64_t HistoricalContext;
    int64_t TimeStamp; /* union: CountLost, KernelHandle, TimeStamp */
    GUID_T Guid;
    uint32_t ClientContext;
    uint32_t Flags;
} WNODE_HEADER;

typedef struct { /* evntrace.h */
    WNODE_HEADER Wnode;
    uint32_t BufferSize, MinimumBuffers, MaximumBuffers, MaximumFileSize, LogFileMode, FlushTimer, EnableFlags;
    int32_t AgeLimit;
    uint32_t NumberOfBuffers, FreeBuffers, EventsLost, BuffersWritten, LogBuffersLost, RealTimeBuffersLost;
    void *LoggerThreadId;
    uint32_t LogFileNameOffset, LoggerNameOffset;
} EVENT_TRACE_PROPERTIES;

typedef struct {
    uint16_t Size, FieldTypeFlags;
    uint32_t Version, ThreadId, ProcessId;
    int64_t TimeStamp;
    GUID_T Guid;
    uint64_t ProcessorTime;
} EVENT_TRACE_HEADER;

typedef struct {
    EVENT_TRACE_HEADER Header;
    uint32_t InstanceId, ParentInstanceId;
    GUID_T ParentGuid;
    void *MofData;
    uint32_t MofLength;
    uint32_t BufferContext;
} EVENT_TRACE;

typedef struct {
    uint16_t v[8];
} SYSTEMTIME_T;

typedef struct {
    int32_t Bias;
    uint16_t StandardName[32];
    SYSTEMTIME_T StandardDate;
    int32_t StandardBias;
    uint16_t DaylightName[32];
    SYSTEMTIME_T DaylightDate;
    int32_t DaylightBias;
} TIME_ZONE_INFORMATION;

typedef struct {
    uint32_t BufferSize, Version, ProviderVersion, NumberOfProcessors;
    int64_t EndTime;
    uint32_t TimerResolution, MaximumFileSize, LogFileMode, BuffersWritten;
    GUID_T LogInstanceGuid; /* union: StartBuffers, PointerSize, EventsLost, CpuSpeedInMHz */
    uint16_t *LoggerName, *LogFileName;
    TIME_ZONE_INFORMATION TimeZone;
    int64_t BootTime, PerfFreq, StartTime;
    uint32_t ReservedFlags, BuffersLost;
} TRACE_LOGFILE_HEADER;

typedef struct {
    uint16_t Size, HeaderType, Flags, EventProperty;
    uint32_t ThreadId, ProcessId;
    int64_t TimeStamp;
    GUID_T ProviderId;
    EVENT_DESCRIPTOR EventDescriptor;
    uint64_t ProcessorTime;
    GUID_T ActivityId;
} EVENT_HEADER;

typedef struct {
    uint16_t Reserved1, ExtType, Linkage, DataSize;
    uint64_t DataPtr;
} EVENT_HEADER_EXTENDED_DATA_ITEM;

typedef struct {
    EVENT_HEADER EventHeader;
    union { /* ETW_BUFFER_CONTEXT */
        struct {
            uint8_t ProcessorNumber, Alignment;
        } b;
        uint16_t ProcessorIndex; /* valid with EVENT_HEADER_FLAG_PROCESSOR_INDEX */
    } u;
    uint16_t LoggerId;
    uint16_t ExtendedDataCount, UserDataLength;
    EVENT_HEADER_EXTENDED_DATA_ITEM *ExtendedData;
    void *UserData;
    void *UserContext;
} EVENT_RECORD;

typedef void (*EVENT_RECORD_CALLBACK)(EVENT_RECORD *record);

typedef struct {
    uint16_t *LogFileName;
    uint16_t *LoggerName;
    int64_t CurrentTime;
    uint32_t BuffersRead;
    uint32_t ProcessTraceMode; /* union with LogFileMode */
    EVENT_TRACE CurrentEvent;
    TRACE_LOGFILE_HEADER LogfileHeader;
    void *BufferCallback;
    uint32_t BufferSize, Filled, EventsLost;
    EVENT_RECORD_CALLBACK EventRecordCallback; /* union with EventCallback */
    uint32_t IsKernelTrace;
    void *Context;
} EVENT_TRACE_LOGFILEW;

typedef struct {
    uint32_t Version, EnableProperty, ControlFlags;
    GUID_T SourceId;
    void *EnableFilterDesc;
    uint32_t FilterDescCount;
} ENABLE_TRACE_PARAMETERS;

/* The x64 sizes and offsets of the Windows SDK (evntrace.h, evntcons.h, wmistr.h). */
_Static_assert(sizeof(WNODE_HEADER) == 48, "WNODE_HEADER");
_Static_assert(offsetof(WNODE_HEADER, Guid) == 24 && offsetof(WNODE_HEADER, Flags) == 44, "WNODE_HEADER");
_Static_assert(sizeof(EVENT_TRACE_PROPERTIES) == 120, "EVENT_TRACE_PROPERTIES");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, BufferSize) == 48, "EVENT_TRACE_PROPERTIES.BufferSize");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LogFileMode) == 64, "EVENT_TRACE_PROPERTIES.LogFileMode");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, FlushTimer) == 68, "EVENT_TRACE_PROPERTIES.FlushTimer");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, EventsLost) == 88, "EVENT_TRACE_PROPERTIES.EventsLost");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LoggerThreadId) == 104, "EVENT_TRACE_PROPERTIES.LoggerThreadId");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LoggerNameOffset) == 116, "EVENT_TRACE_PROPERTIES.LoggerNameOffset");
_Static_assert(sizeof(EVENT_TRACE_HEADER) == 48 && sizeof(EVENT_TRACE) == 88, "EVENT_TRACE");
_Static_assert(sizeof(TIME_ZONE_INFORMATION) == 172, "TIME_ZONE_INFORMATION");
_Static_assert(sizeof(TRACE_LOGFILE_HEADER) == 280, "TRACE_LOGFILE_HEADER");
_Static_assert(offsetof(TRACE_LOGFILE_HEADER, TimeZone) == 72, "TRACE_LOGFILE_HEADER.TimeZone");
_Static_assert(offsetof(TRACE_LOGFILE_HEADER, BootTime) == 248, "TRACE_LOGFILE_HEADER.BootTime");
_Static_assert(sizeof(EVENT_TRACE_LOGFILEW) == 448, "EVENT_TRACE_LOGFILEW");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, ProcessTraceMode) == 28, "EVENT_TRACE_LOGFILEW.ProcessTraceMode");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, CurrentEvent) == 32, "EVENT_TRACE_LOGFILEW.CurrentEvent");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, LogfileHeader) == 120, "EVENT_TRACE_LOGFILEW.LogfileHeader");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, BufferCallback) == 400, "EVENT_TRACE_LOGFILEW.BufferCallback");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, EventRecordCallback) == 424, "EVENT_TRACE_LOGFILEW.EventRecordCallback");
_Static_assert(offsetof(EVENT_TRACE_LOGFILEW, Context) == 440, "EVENT_TRACE_LOGFILEW.Context");
_Static_assert(sizeof(ENABLE_TRACE_PARAMETERS) == 48, "ENABLE_TRACE_PARAMETERS");
_Static_assert(offsetof(ENABLE_TRACE_PARAMETERS, SourceId) == 12, "ENABLE_TRACE_PARAMETERS.SourceId");
_Static_assert(offsetof(ENABLE_TRACE_PARAMETERS, EnableFilterDesc) == 32, "ENABLE_TRACE_PARAMETERS.EnableFilterDesc");
_Static_assert(offsetof(ENABLE_TRACE_PARAMETERS, FilterDescCount) == 40, "ENABLE_TRACE_PARAMETERS.FilterDescCount");
_Static_assert(sizeof(EVENT_HEADER) == 80, "EVENT_HEADER");
_Static_assert(offsetof(EVENT_HEADER, TimeStamp) == 16 && offsetof(EVENT_HEADER, ProviderId) == 24, "EVENT_HEADER");
_Static_assert(offsetof(EVENT_HEADER, EventDescriptor) == 40 && offsetof(EVENT_HEADER, ActivityId) == 64, "EVENT_HEADER");
_Static_assert(sizeof(EVENT_HEADER_EXTENDED_DATA_ITEM) == 16, "EVENT_HEADER_EXTENDED_DATA_ITEM");
_Static_assert(offsetof(EVENT_HEADER_EXTENDED_DATA_ITEM, DataSize) == 6, "EVENT_HEADER_EXTENDED_DATA_ITEM.DataSize");
_Static_assert(sizeof(EVENT_RECORD) == 112, "EVENT_RECORD");
_Static_assert(offsetof(EVENT_RECORD, u.ProcessorIndex) == 80, "EVENT_RECORD.BufferContext.ProcessorIndex");
_Static_assert(offsetof(EVENT_RECORD, u.b.ProcessorNumber) == 80, "EVENT_RECORD.BufferContext.ProcessorNumber");
_Static_assert(offsetof(EVENT_RECORD, LoggerId) == 82, "EVENT_RECORD.BufferContext.LoggerId");
_Static_assert(offsetof(EVENT_RECORD, ExtendedDataCount) == 84, "EVENT_RECORD.ExtendedDataCount");
_Static_assert(offsetof(EVENT_RECORD, UserDataLength) == 86, "EVENT_RECORD.UserDataLength");
_Static_assert(offsetof(EVENT_RECORD, ExtendedData) == 88, "EVENT_RECORD.ExtendedData");
_Static_assert(offsetof(EVENT_RECORD, UserData) == 96, "EVENT_RECORD.UserData");
_Static_assert(offsetof(EVENT_RECORD, UserContext) == 104, "EVENT_RECORD.UserContext");

#define WNODE_FLAG_TRACED_GUID 0x00020000u
#define EVENT_TRACE_REAL_TIME_MODE 0x00000100u
#define PROCESS_TRACE_MODE_REAL_TIME 0x00000100u
#define PROCESS_TRACE_MODE_EVENT_RECORD 0x10000000u
#define INVALID_PROCESSTRACE_HANDLE 0xFFFFFFFFFFFFFFFFull
#define EVENT_HEADER_FLAG_EXTENDED_INFO 0x0001
#define EVENT_HEADER_FLAG_64_BIT_HEADER 0x0040
#define EVENT_HEADER_FLAG_PROCESSOR_INDEX 0x0200
#define EXT_RELATED_ACTIVITYID 1
#define EXT_EVENT_SCHEMA_TL 11
#define EXT_PROV_TRAITS 12
#define ERROR_ACCESS_DENIED_ 5
#define ERROR_ALREADY_EXISTS 183
#define ERROR_WMI_INSTANCE_NOT_FOUND 4201
#define ERROR_CTX_CLOSE_PENDING 7007
#define FILETIME_UNIX_EPOCH 116444736000000000ull

#define MAX_SESSIONS 8
#define MAX_SESSION_ENABLES 8
#define SESSION_NAME_MAX 1024
#define SESSION_BASE 0x5E55000000000000ULL /* session (controller) handles */
#define TRACE_BASE 0x7ACE000000000000ULL   /* trace (consumer) handles */

typedef struct {
    int live;
    uint8_t guid[16];
    uint8_t level;
    uint64_t any, all;
} session_enable_t;

typedef struct queued {
    struct queued *next;
    EVENT_RECORD rec;
    EVENT_HEADER_EXTENDED_DATA_ITEM ext[3];
    uint8_t *blob; /* metadata, traits, related id and user data, one allocation */
} queued_t;

typedef struct {
    int in_use;  /* slot taken until the session is stopped and its trace closed */
    int running; /* started and not stopped: the name is taken, events are queued */
    int opened, trace_closed, processing;
    uint16_t name[SESSION_NAME_MAX + 1];
    uint32_t buffer_kb, flush_timer, queue_max;
    session_enable_t enables[MAX_SESSION_ENABLES];
    queued_t *head, *tail;
    uint32_t queued, lost, delivered;
    EVENT_RECORD_CALLBACK callback;
    void *context;
    uint32_t last_enable_property, last_params_version;
} session_t;

static session_t sessions[MAX_SESSIONS];
static pthread_cond_t session_cond = PTHREAD_COND_INITIALIZER;
static uint32_t start_result;     /* forced StartTraceW result (e.g. 5, access denied) */
static uint32_t session_queue_max = 100000;
static __thread uint32_t last_error;

/* The combined enable state of all running sessions for a GUID (lock held): 0 if none. */
static int session_state(const uint8_t *guid, uint8_t *level, uint64_t *any, uint64_t *all) {
    int found = 0, every_keyword = 0;
    unsigned lp1 = 0;
    *any = 0;
    *all = 0;
    for (int s = 0; s < MAX_SESSIONS; s++) {
        if (!sessions[s].running) continue;
        for (int e = 0; e < MAX_SESSION_ENABLES; e++) {
            session_enable_t *en = &sessions[s].enables[e];
            if (!en->live || memcmp(en->guid, guid, 16) != 0) continue;
            unsigned l = en->level ? en->level + 1u : 256u;
            if (l > lp1) lp1 = l;
            *any |= en->any;
            every_keyword |= en->any == 0;
            *all = found ? (*all & en->all) : en->all;
            found = 1;
        }
    }
    *level = found ? (uint8_t)(lp1 == 256u ? 0 : lp1 - 1u) : 0;
    if (every_keyword) *any = 0; /* one session wants every keyword */
    return found;
}

/* ---- the controller and consumer API (real-time sessions) -------------------------------- */

static uint32_t thread_id(void) {
#ifdef __linux__
    return (uint32_t)syscall(SYS_gettid);
#else
    return (uint32_t)(uintptr_t)pthread_self();
#endif
}

static int32_t processor_index = -1; /* fake_set_processor_index: the index records carry, -1: this CPU */

static uint16_t cpu_number(void) {
    if (processor_index >= 0) return (uint16_t)processor_index;
#ifdef __linux__
    int cpu = sched_getcpu();
    return (uint16_t)(cpu < 0 ? 0 : cpu);
#else
    return 0;
#endif
}

static size_t wlen(const uint16_t *s) {
    size_t n = 0;
    while (n <= SESSION_NAME_MAX && s[n]) n++;
    return n;
}

static int session_by_name(const uint16_t *name) { /* lock held; running sessions only */
    size_t n = wlen(name);
    if (n == 0 || n > SESSION_NAME_MAX) return -1;
    for (int s = 0; s < MAX_SESSIONS; s++)
        if (sessions[s].running && wlen(sessions[s].name) == n && memcmp(sessions[s].name, name, 2 * n) == 0)
            return s;
    return -1;
}

static int session_by_handle(uint64_t h) { /* lock held */
    if (h < SESSION_BASE + 1 || h > SESSION_BASE + MAX_SESSIONS) return -1;
    int s = (int)(h - SESSION_BASE - 1);
    return sessions[s].running ? s : -1;
}

static int session_by_trace(uint64_t h) { /* lock held */
    if (h < TRACE_BASE + 1 || h > TRACE_BASE + MAX_SESSIONS) return -1;
    int s = (int)(h - TRACE_BASE - 1);
    return sessions[s].in_use && sessions[s].opened && !sessions[s].trace_closed ? s : -1;
}

static void free_queue(session_t *se) { /* lock held */
    for (queued_t *q = se->head, *next; q; q = next) {
        next = q->next;
        free(q->blob);
        free(q);
    }
    se->head = se->tail = NULL;
    se->queued = 0;
}

static void release_if_done(session_t *se) { /* lock held */
    if (!se->running && (!se->opened || (se->trace_closed && !se->processing))) {
        free_queue(se);
        memset(se, 0, sizeof *se);
    }
}

static int props_ok(const EVENT_TRACE_PROPERTIES *p) {
    return p && p->Wnode.BufferSize >= sizeof *p && (p->Wnode.Flags & WNODE_FLAG_TRACED_GUID);
}

/* Call the enable callbacks of the live providers with this GUID with the sessions' combined
   state (lock NOT held). */
static void notify_providers(const uint8_t *guid) {
    provider_t live[MAX_PROVIDERS];
    int n = 0;
    uint8_t level;
    uint64_t any, all;
    pthread_mutex_lock(&lock);
    int on = session_state(guid, &level, &any, &all);
    for (int i = 0; i < MAX_PROVIDERS; i++)
        if (providers[i].live && memcmp(providers[i].guid, guid, 16) == 0) live[n++] = providers[i];
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) call_on_thread(live[i], on ? 1u : 0u, level, any, all);
}

uint32_t GetLastError(void) { return last_error; }

uint32_t StartTraceW(uint64_t *handle, const uint16_t *name, EVENT_TRACE_PROPERTIES *props) {
    if (!handle || !name || !props_ok(props)) return ERROR_INVALID_PARAMETER;
    size_t n = wlen(name);
    if (n == 0 || n > SESSION_NAME_MAX) return ERROR_INVALID_PARAMETER;
    if (props->LoggerNameOffset < sizeof *props || props->LoggerNameOffset + 2 * (n + 1) > props->Wnode.BufferSize)
        return ERROR_INVALID_PARAMETER; /* no room for the name after the structure */
    if (!(props->LogFileMode & EVENT_TRACE_REAL_TIME_MODE) || props->LogFileNameOffset != 0)
        return ERROR_INVALID_PARAMETER; /* the stand-in emulates real-time sessions only */
    pthread_mutex_lock(&lock);
    if (start_result) {
        uint32_t rc = start_result;
        pthread_mutex_unlock(&lock);
        return rc;
    }
    if (session_by_name(name) >= 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_ALREADY_EXISTS;
    }
    int s;
    for (s = 0; s < MAX_SESSIONS && sessions[s].in_use; s++) {
    }
    if (s == MAX_SESSIONS) {
        pthread_mutex_unlock(&lock);
        return 8;
    }
    session_t *se = &sessions[s];
    memset(se, 0, sizeof *se);
    se->in_use = se->running = 1;
    memcpy(se->name, name, 2 * n);
    se->buffer_kb = props->BufferSize ? props->BufferSize : 64;
    se->flush_timer = props->FlushTimer;
    se->queue_max = session_queue_max;
    memcpy((uint8_t *)props + props->LoggerNameOffset, name, 2 * (n + 1)); /* ETW copies the name back */
    *handle = SESSION_BASE + 1 + (uint64_t)s;
    pthread_mutex_unlock(&lock);
    return 0;
}

uint32_t ControlTraceW(uint64_t handle, const uint16_t *name, EVENT_TRACE_PROPERTIES *props, uint32_t code) {
    if (!props_ok(props)) return ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    int s = handle ? session_by_handle(handle) : (name ? session_by_name(name) : -1);
    if (s < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_WMI_INSTANCE_NOT_FOUND;
    }
    session_t *se = &sessions[s];
    props->EventsLost = se->lost;
    props->BufferSize = se->buffer_kb;
    props->FlushTimer = se->flush_timer;
    props->LogFileMode = EVENT_TRACE_REAL_TIME_MODE;
    if (code == 0 || code == 3) { /* QUERY, FLUSH */
        pthread_mutex_unlock(&lock);
        return 0;
    }
    if (code != 1) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_PARAMETER;
    }
    /* STOP: the name is free again; ProcessTrace delivers what is queued, then returns. */
    se->running = 0;
    uint8_t guids[MAX_SESSION_ENABLES][16];
    int ng = 0;
    for (int e = 0; e < MAX_SESSION_ENABLES; e++)
        if (se->enables[e].live) memcpy(guids[ng++], se->enables[e].guid, 16);
    release_if_done(se);
    pthread_cond_broadcast(&session_cond);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < ng; i++) notify_providers(guids[i]);
    return 0;
}

uint32_t EnableTraceEx2(uint64_t handle, const uint8_t *provider, uint32_t code, uint8_t level, uint64_t any,
                        uint64_t all, uint32_t timeout, const ENABLE_TRACE_PARAMETERS *params) {
    (void)timeout;
    if (!provider || code > 2) return ERROR_INVALID_PARAMETER;
    if (params && (params->Version != 2 || params->FilterDescCount != 0 || params->EnableFilterDesc))
        return ERROR_INVALID_PARAMETER; /* version 2 without filters is what the stand-in knows */
    pthread_mutex_lock(&lock);
    int s = session_by_handle(handle);
    if (s < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    session_t *se = &sessions[s];
    se->last_params_version = params ? params->Version : 0;
    se->last_enable_property = params ? params->EnableProperty : 0;
    int free_e = -1, found = -1;
    for (int e = 0; e < MAX_SESSION_ENABLES; e++) {
        if (se->enables[e].live && memcmp(se->enables[e].guid, provider, 16) == 0) found = e;
        if (!se->enables[e].live && free_e < 0) free_e = e;
    }
    if (code == 1) {
        int e = found >= 0 ? found : free_e;
        if (e < 0) {
            pthread_mutex_unlock(&lock);
            return 8;
        }
        se->enables[e].live = 1;
        memcpy(se->enables[e].guid, provider, 16);
        se->enables[e].level = level;
        se->enables[e].any = any;
        se->enables[e].all = all;
    } else if (code == 0 && found >= 0) {
        se->enables[found].live = 0;
    }
    pthread_mutex_unlock(&lock);
    if (code != 2) notify_providers(provider);
    return 0;
}

uint64_t OpenTraceW(EVENT_TRACE_LOGFILEW *lf) {
    if (!lf || !lf->LoggerName || lf->LogFileName || !lf->EventRecordCallback ||
        (lf->ProcessTraceMode & (PROCESS_TRACE_MODE_REAL_TIME | PROCESS_TRACE_MODE_EVENT_RECORD)) !=
            (PROCESS_TRACE_MODE_REAL_TIME | PROCESS_TRACE_MODE_EVENT_RECORD)) {
        last_error = ERROR_INVALID_PARAMETER;
        return INVALID_PROCESSTRACE_HANDLE;
    }
    pthread_mutex_lock(&lock);
    int s = session_by_name(lf->LoggerName);
    if (s < 0 || sessions[s].opened) {
        pthread_mutex_unlock(&lock);
        last_error = s < 0 ? ERROR_WMI_INSTANCE_NOT_FOUND : ERROR_ALREADY_EXISTS;
        return INVALID_PROCESSTRACE_HANDLE;
    }
    session_t *se = &sessions[s];
    se->opened = 1;
    se->callback = lf->EventRecordCallback;
    se->context = lf->Context;
    lf->LogfileHeader.BufferSize = se->buffer_kb * 1024u;
    lf->LogfileHeader.LogFileMode = EVENT_TRACE_REAL_TIME_MODE;
    lf->BufferSize = se->buffer_kb * 1024u;
    pthread_mutex_unlock(&lock);
    last_error = 0;
    return TRACE_BASE + 1 + (uint64_t)s;
}

uint32_t ProcessTrace(const uint64_t *handles, uint32_t count, const void *start, const void *end) {
    (void)start;
    (void)end;
    if (!handles || count != 1) return ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    int s = session_by_trace(handles[0]);
    if (s < 0 || sessions[s].processing) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    session_t *se = &sessions[s];
    se->processing = 1;
    for (;;) {
        while (!se->head && se->running && !se->trace_closed) pthread_cond_wait(&session_cond, &lock);
        if (se->trace_closed || !se->head) break; /* closed, or stopped with nothing left */
        queued_t *q = se->head;
        se->head = q->next;
        if (!se->head) se->tail = NULL;
        se->queued--;
        se->delivered++;
        EVENT_RECORD_CALLBACK cb = se->callback;
        q->rec.UserContext = se->context;
        pthread_mutex_unlock(&lock);
        cb(&q->rec);
        free(q->blob);
        free(q);
        pthread_mutex_lock(&lock);
    }
    se->processing = 0;
    release_if_done(se);
    pthread_cond_broadcast(&session_cond);
    pthread_mutex_unlock(&lock);
    return 0;
}

uint32_t CloseTrace(uint64_t handle) {
    pthread_mutex_lock(&lock);
    int s = session_by_trace(handle);
    if (s < 0) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_HANDLE;
    }
    session_t *se = &sessions[s];
    se->trace_closed = 1;
    uint32_t rc = se->processing ? ERROR_CTX_CLOSE_PENDING : 0;
    release_if_done(se);
    pthread_cond_broadcast(&session_cond);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Queue an event that a provider wrote into every running session that enabled it and whose
   level and keyword filter it passes (lock held), as ETW builds an EVENT_RECORD. */
static void deliver(const uint8_t *guid, int traits_set, const EVENT_DESCRIPTOR *desc, const uint8_t *activity,
                    const uint8_t *related, uint32_t count, const EVENT_DATA_DESCRIPTOR *data) {
    for (int s = 0; s < MAX_SESSIONS; s++) {
        session_t *se = &sessions[s];
        if (!se->running) continue;
        int want = 0;
        for (int e = 0; e < MAX_SESSION_ENABLES && !want; e++) {
            session_enable_t *en = &se->enables[e];
            if (!en->live || memcmp(en->guid, guid, 16) != 0) continue;
            unsigned lp1 = en->level ? en->level + 1u : 256u;
            uint64_t k = desc->Keyword;
            want = desc->Level < lp1 &&
                   (k == 0 || ((en->any == 0 || (k & en->any)) && (k & en->all) == en->all));
        }
        if (!want) continue;
        if (se->queued >= se->queue_max) {
            se->lost++;
            continue;
        }
        /* Without provider traits ETW ignores the descriptor types: everything is user data. */
        size_t meta = 0, traits = 0, user = 0;
        for (uint32_t j = 0; j < count; j++) {
            uint8_t t = traits_set ? data[j].Type : 0;
            if (t == 1) meta += data[j].Size;
            else if (t == 2) traits += data[j].Size;
            else user += data[j].Size;
        }
        if (meta > 0xFFFF || traits > 0xFFFF || user > 0xFFFF ||
            meta + traits + user + sizeof(EVENT_HEADER) > se->buffer_kb * 1024u) {
            se->lost++; /* larger than the session's buffer: ETW drops it */
            continue;
        }
        queued_t *q = calloc(1, sizeof *q);
        uint8_t *blob = malloc(meta + traits + user + 16 + 1);
        if (!q || !blob) {
            free(q);
            free(blob);
            se->lost++;
            continue;
        }
        q->blob = blob;
        uint8_t *pm = blob, *pt = pm + meta, *pr = pt + traits, *pu = pr + 16;
        size_t om = 0, ot = 0, ou = 0;
        for (uint32_t j = 0; j < count; j++) {
            uint8_t t = traits_set ? data[j].Type : 0;
            const void *src = (const void *)(uintptr_t)data[j].Ptr;
            if (!data[j].Size) continue;
            if (t == 1) { memcpy(pm + om, src, data[j].Size); om += data[j].Size; }
            else if (t == 2) { memcpy(pt + ot, src, data[j].Size); ot += data[j].Size; }
            else { memcpy(pu + ou, src, data[j].Size); ou += data[j].Size; }
        }
        EVENT_RECORD *r = &q->rec;
        EVENT_HEADER *h = &r->EventHeader;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        h->Size = (uint16_t)sizeof(EVENT_HEADER);
        h->Flags = EVENT_HEADER_FLAG_64_BIT_HEADER | EVENT_HEADER_FLAG_PROCESSOR_INDEX; /* as Windows 8+ */
        h->ThreadId = thread_id();
        h->ProcessId = (uint32_t)getpid();
        h->TimeStamp = (int64_t)(FILETIME_UNIX_EPOCH + (uint64_t)ts.tv_sec * 10000000u + (uint64_t)ts.tv_nsec / 100u);
        memcpy(&h->ProviderId, guid, 16);
        h->EventDescriptor = *desc;
        memcpy(&h->ActivityId, activity ? activity : thread_activity, 16); /* NULL: the thread's id */
        int n = 0;
        if (related) {
            memcpy(pr, related, 16);
            q->ext[n] = (EVENT_HEADER_EXTENDED_DATA_ITEM){0, EXT_RELATED_ACTIVITYID, 0, 16, (uint64_t)(uintptr_t)pr};
            n++;
        }
        if (meta) {
            q->ext[n] = (EVENT_HEADER_EXTENDED_DATA_ITEM){0, EXT_EVENT_SCHEMA_TL, 0, (uint16_t)meta, (uint64_t)(uintptr_t)pm};
            n++;
        }
        if (traits) {
            q->ext[n] = (EVENT_HEADER_EXTENDED_DATA_ITEM){0, EXT_PROV_TRAITS, 0, (uint16_t)traits, (uint64_t)(uintptr_t)pt};
            n++;
        }
        if (n) h->Flags |= EVENT_HEADER_FLAG_EXTENDED_INFO;
        r->u.ProcessorIndex = cpu_number(); /* ProcessorNumber is its low byte */
        r->LoggerId = (uint16_t)(s + 1);
        r->ExtendedDataCount = (uint16_t)n;
        r->ExtendedData = n ? q->ext : NULL;
        r->UserDataLength = (uint16_t)user;
        r->UserData = user ? pu : NULL;
        if (se->tail) se->tail->next = q;
        else se->head = q;
        se->tail = q;
        se->queued++;
    }
    pthread_cond_broadcast(&session_cond);
}

/* ---- test-only controls of the sessions ---------------------------------------------------- */

void fake_set_start_result(uint32_t code) {
    pthread_mutex_lock(&lock);
    start_result = code;
    pthread_mutex_unlock(&lock);
}

/* Queue at most this many records per session (beyond: counted lost), for sessions started later. */
void fake_set_session_queue_max(uint32_t n) {
    pthread_mutex_lock(&lock);
    session_queue_max = n;
    pthread_mutex_unlock(&lock);
}

/* Slots in use: running sessions plus stopped ones whose trace is not closed yet. */
uint32_t fake_sessions_in_use(void) {
    uint32_t n = 0;
    pthread_mutex_lock(&lock);
    for (int s = 0; s < MAX_SESSIONS; s++) n += sessions[s].in_use ? 1u : 0u;
    pthread_mutex_unlock(&lock);
    return n;
}

/* The running session called name (UTF-16): its lost count, enable-parameter version and
   EnableProperty; returns -1 when no such session runs. */
int fake_session_info(const uint16_t *name, uint32_t *lost, uint32_t *params_version, uint32_t *enable_property) {
    pthread_mutex_lock(&lock);
    int s = session_by_name(name);
    if (s >= 0) {
        *lost = sessions[s].lost;
        *params_version = sessions[s].last_params_version;
        *enable_property = sessions[s].last_enable_property;
    }
    pthread_mutex_unlock(&lock);
    return s < 0 ? -1 : 0;
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
    providers[i].traits_set = 0;
    provider_t prov = providers[i];
    uint32_t en = state_enabled;
    uint8_t lv = state_level;
    uint64_t any = state_any, all = state_all;
    if (session_state(provider_id, &lv, &any, &all)) en = 1; /* a session enabled this GUID */
    else {
        lv = state_level;
        any = state_any;
        all = state_all;
    }
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
    if (info_class == 2) providers[slot_of(handle)].traits_set = 1;
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
    int i = slot_of(handle);
    deliver(providers[i].guid, providers[i].traits_set, desc, activity, related, count, data);
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

/* The processor index the next delivered records carry (a machine with more than 256 CPUs);
   -1: the CPU the writer runs on. */
void fake_set_processor_index(int32_t index) {
    pthread_mutex_lock(&lock);
    processor_index = index;
    pthread_mutex_unlock(&lock);
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
    processor_index = -1;
    state_enabled = 0;
    state_level = 0;
    state_any = state_all = 0;
    unregister_calls = 0;
    callback_calls = 0;
    start_result = 0;
    session_queue_max = 100000;
    for (int s = 0; s < MAX_SESSIONS; s++) {
        if (sessions[s].processing) continue; /* a consumer still runs: left to it */
        free_queue(&sessions[s]);
        memset(&sessions[s], 0, sizeof sessions[s]);
    }
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
