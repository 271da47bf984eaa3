/* A minimal NVTX injection library for tests: logs domain creation, push/pop, start/end and marks to $NSROOF_NVTX_LOG.
   Loaded through NVTX_INJECTION64_PATH; needs no GPU (see ../shared/docs/ncu-formats.md §3.4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvtx3/nvToolsExt.h"

static FILE *out;

static const char *name_of(nvtxDomainHandle_t d) { return d ? (const char *)d : "<default>"; }

static const char *message_of(const nvtxEventAttributes_t *a) {
    if (!a) return "";
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) return (const char *)a->message.registered;
    return "?";
}

static nvtxDomainHandle_t domain_create(const char *name) {
    fprintf(out, "domain %s\n", name);
    fflush(out);
    return (nvtxDomainHandle_t)strdup(name);
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *s) { return (nvtxStringHandle_t)strdup(s); }

static int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    fprintf(out, "push %s %s\n", name_of(d), message_of(a));
    fflush(out);
    return 0;
}

static int pop(nvtxDomainHandle_t d) {
    fprintf(out, "pop %s\n", name_of(d));
    fflush(out);
    return 0;
}

static nvtxRangeId_t next_range = 1;

static nvtxRangeId_t range_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    fprintf(out, "start %s %s -> %llu\n", name_of(d), message_of(a), (unsigned long long)next_range);
    fflush(out);
    return next_range++;
}

static void range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    fprintf(out, "end %s %llu\n", name_of(d), (unsigned long long)id);
    fflush(out);
}

static void mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    fprintf(out, "mark %s %s\n", name_of(d), message_of(a));
    fflush(out);
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
    out = fopen(getenv("NSROOF_NVTX_LOG"), "w");
    if (!out) return 0;
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = 0;
    unsigned int size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_string;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop;
    *table[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
    *table[NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)range_start;
    *table[NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)range_end;
    return 1;
}
