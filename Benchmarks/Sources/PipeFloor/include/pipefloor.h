// Figure 2's floor (shared/design/performance.md): round trips over pipes with a child process,
// messages framed as the protocol frames them (`Content-Length: N\r\n\r\n` and N bytes), of the
// sizes the protocol benchmark measured. No JSON: the bare cost of the pipes, the reads and writes,
// the wake-ups and the framing.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct pipefloor {
    int pid;            // the child
    int to_child;       // the parent writes requests here
    int from_child;     // and reads responses here
    size_t request_size;    // a whole request frame, header included
    size_t response_size;   // a whole response frame, header included
    unsigned char *request; // one framed request
    unsigned char *buffer;  // the parent's read buffer
    size_t capacity, start, end;
} pipefloor;

/// Forks the child: it reads framed requests (bodies of `request_body` bytes, as the parent sends)
/// and answers each, with one write(2), by a framed response whose body has `response_body` bytes.
/// Answers 0, or -1 with errno set.
int pipefloor_start(pipefloor *floor, size_t request_body, size_t response_body);

/// `count` round trips one at a time: write a request, read until its response is complete.
/// Answers the elapsed nanoseconds (CLOCK_MONOTONIC), or -1 on an error.
int64_t pipefloor_sync(pipefloor *floor, long count);

/// `count` round trips with up to `window` requests in flight: fill the window (one write(2) per
/// request), then after each read(2) take every complete response and top the window up again.
/// Answers the elapsed nanoseconds, or -1 on an error.
int64_t pipefloor_pipelined(pipefloor *floor, long count, int window);

/// Closes the child's input and waits for it.
void pipefloor_stop(pipefloor *floor);

/// Makes stdout line-buffered (the benchmark's table appears line by line also in a file).
void pipefloor_line_buffered_stdout(void);

/// Pins every thread of process `pid` (0: this process) to processor `cpu` (sched_setaffinity on
/// each task of /proc/PID/task; threads created later inherit their creator's mask). Answers 0, or
/// -1 with errno set.
int pipefloor_pin_process(int pid, int cpu);
