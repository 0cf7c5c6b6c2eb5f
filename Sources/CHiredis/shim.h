#ifndef ASSERTGATE_CHIREDIS_SHIM_H
#define ASSERTGATE_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <string.h>

/* hiredis 1.x passes array lengths as size_t and adds RESP3 hooks
   (createDouble, createBool) that RESP2 replies never reach; 0.14 passes int. */
#if HIREDIS_MAJOR >= 1
typedef size_t ag_hiredis_array_length;
#else
typedef int ag_hiredis_array_length;
#endif

/* Fills a function table by field name, so the Swift side compiles against
   either layout. */
static inline void ag_hiredis_fill_functions(
    redisReplyObjectFunctions *fn,
    void *(*createString)(const redisReadTask *, char *, size_t),
    void *(*createArray)(const redisReadTask *, ag_hiredis_array_length),
    void *(*createInteger)(const redisReadTask *, long long),
    void *(*createNil)(const redisReadTask *),
    void (*freeObject)(void *)) {
    memset(fn, 0, sizeof(*fn));
    fn->createString = createString;
    fn->createArray = createArray;
    fn->createInteger = createInteger;
    fn->createNil = createNil;
    fn->freeObject = freeObject;
}
#endif
