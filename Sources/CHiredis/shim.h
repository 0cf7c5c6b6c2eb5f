#ifndef ASSERTGATE_CHIREDIS_SHIM_H
#define ASSERTGATE_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#endif
