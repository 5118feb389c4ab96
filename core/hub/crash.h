/*
 * crash.h - a backtrace in the hub's log on a fatal signal (crash.c).
 */
#ifndef RSHARE_CRASH_H
#define RSHARE_CRASH_H

void crash_install(void);

#endif
