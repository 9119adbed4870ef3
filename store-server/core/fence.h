/* Forced into every core source (core/meson.build): libevent's headers come out empty here, so a core
 * file that reaches for the event loop fails to compile instead of quietly depending on it.  The
 * daemon's own headers (server.h, conn.h, persist.h, ...) are not on the core's include path at all. */
#ifndef MUSTERD_CORE_FENCE_H
#define MUSTERD_CORE_FENCE_H

#define EVENT1_EVENT_H_INCLUDED_
#define EVENT2_EVENT_H_INCLUDED_
#define EVENT2_EVENT_STRUCT_H_INCLUDED_
#define EVENT2_EVENT_COMPAT_H_INCLUDED_
#define EVENT2_UTIL_H_INCLUDED_
#define EVENT2_BUFFER_H_INCLUDED_
#define EVENT2_BUFFEREVENT_H_INCLUDED_
#define EVENT2_LISTENER_H_INCLUDED_
#define EVENT2_HTTP_H_INCLUDED_
#define EVENT2_THREAD_H_INCLUDED_

#endif
