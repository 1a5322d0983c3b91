// See include/pipefloor.h.
#define _GNU_SOURCE
#include "pipefloor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int write_all(int fd, const unsigned char *bytes, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = write(fd, bytes + done, count - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

/// A framed message of `body` bytes: the header, then '{' and spaces and '}' (any bytes would do).
static unsigned char *make_frame(size_t body, size_t *total) {
    char header[64];
    int length = snprintf(header, sizeof header, "Content-Length: %zu\r\n\r\n", body);
    unsigned char *frame = malloc((size_t)length + body + 1);
    if (!frame) return NULL;
    memcpy(frame, header, (size_t)length);
    memset(frame + length, ' ', body);
    if (body >= 2) { frame[length] = '{'; frame[length + body - 1] = '}'; }
    *total = (size_t)length + body;
    return frame;
}

/// The length of the complete frame at the start of bytes[0..<count], or 0 when it is not complete
/// yet (the header `Content-Length: N\r\n\r\n`, as both sides write it), or -1 when malformed.
static long complete_frame(const unsigned char *bytes, size_t count) {
    static const char name[] = "Content-Length: ";
    const size_t prefix = sizeof name - 1;
    if (count < prefix + 5) return 0;
    if (memcmp(bytes, name, prefix) != 0) return -1;
    size_t i = prefix, body = 0;
    while (i < count && bytes[i] >= '0' && bytes[i] <= '9') body = body * 10 + (bytes[i++] - '0');
    if (i + 4 > count) return 0;
    if (memcmp(bytes + i, "\r\n\r\n", 4) != 0) return -1;
    size_t total = i + 4 + body;
    return total <= count ? (long)total : 0;
}

/// The child: answers every complete request with one write of the response frame.
/// Its buffer is allocated before the fork (no malloc in the child of a threaded process).
static void serve(int input, int output, const unsigned char *response, size_t response_size,
                  unsigned char *buffer, size_t capacity) {
    size_t start = 0, end = 0;
    for (;;) {
        long length;
        while ((length = complete_frame(buffer + start, end - start)) > 0) {
            start += (size_t)length;
            if (write_all(output, response, response_size) < 0) _exit(3);
        }
        if (length < 0) _exit(4);
        if (start == end) { start = end = 0; }
        else if (end == capacity) {
            memmove(buffer, buffer + start, end - start);
            end -= start; start = 0;
            if (end == capacity) _exit(5);
        }
        ssize_t n = read(input, buffer + end, capacity - end);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);
        end += (size_t)n;
    }
}

int pipefloor_start(pipefloor *floor, size_t request_body, size_t response_body) {
    memset(floor, 0, sizeof *floor);
    size_t response_size;
    unsigned char *response = make_frame(response_body, &response_size);
    floor->request = make_frame(request_body, &floor->request_size);
    floor->response_size = response_size;
    floor->capacity = 1 << 20;
    floor->buffer = malloc(floor->capacity);
    unsigned char *child_buffer = malloc(1 << 20);
    if (!response || !floor->request || !floor->buffer || !child_buffer) return -1;
    int requests[2], responses[2];
    if (pipe2(requests, O_CLOEXEC) != 0) return -1;
    if (pipe2(responses, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(requests[1]);
        close(responses[0]);
        serve(requests[0], responses[1], response, response_size, child_buffer, 1 << 20);
    }
    free(response);
    free(child_buffer);
    close(requests[0]);
    close(responses[1]);
    floor->pid = pid;
    floor->to_child = requests[1];
    floor->from_child = responses[0];
    return 0;
}

/// Reads once more into the parent's buffer (compacting it first). Answers -1 on error or EOF.
static int fill(pipefloor *floor) {
    if (floor->start == floor->end) floor->start = floor->end = 0;
    else if (floor->end == floor->capacity) {
        memmove(floor->buffer, floor->buffer + floor->start, floor->end - floor->start);
        floor->end -= floor->start;
        floor->start = 0;
    }
    for (;;) {
        ssize_t n = read(floor->from_child, floor->buffer + floor->end, floor->capacity - floor->end);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        floor->end += (size_t)n;
        return 0;
    }
}

/// Takes every complete response in the buffer; answers how many, or -1 when malformed.
static long take_responses(pipefloor *floor) {
    long taken = 0, length;
    while ((length = complete_frame(floor->buffer + floor->start, floor->end - floor->start)) > 0) {
        floor->start += (size_t)length;
        taken++;
    }
    return length < 0 ? -1 : taken;
}

int64_t pipefloor_sync(pipefloor *floor, long count) {
    int64_t begin = now_ns();
    for (long i = 0; i < count; i++) {
        if (write_all(floor->to_child, floor->request, floor->request_size) < 0) return -1;
        long got = 0;
        while (got == 0) {
            if (fill(floor) < 0) return -1;
            got = take_responses(floor);
            if (got < 0 || got > 1) return -1;
        }
    }
    return now_ns() - begin;
}

int64_t pipefloor_pipelined(pipefloor *floor, long count, int window) {
    int64_t begin = now_ns();
    long sent = 0, received = 0;
    while (received < count) {
        while (sent < count && sent - received < window) {
            if (write_all(floor->to_child, floor->request, floor->request_size) < 0) return -1;
            sent++;
        }
        if (fill(floor) < 0) return -1;
        long got = take_responses(floor);
        if (got < 0) return -1;
        received += got;
    }
    return now_ns() - begin;
}

void pipefloor_stop(pipefloor *floor) {
    if (floor->to_child >= 0) close(floor->to_child);
    if (floor->pid > 0) {
        int status;
        while (waitpid(floor->pid, &status, 0) < 0 && errno == EINTR) {}
    }
    if (floor->from_child >= 0) close(floor->from_child);
    free(floor->request);
    free(floor->buffer);
    floor->pid = 0;
    floor->to_child = floor->from_child = -1;
    floor->request = floor->buffer = NULL;
}

void pipefloor_line_buffered_stdout(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

#include <dirent.h>
#include <sched.h>
#include <stdlib.h>

int pipefloor_pin_process(int pid, int cpu) {
    char path[64];
    snprintf(path, sizeof path, pid == 0 ? "/proc/self/task" : "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int result = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (sched_setaffinity(tid, sizeof set, &set) != 0) result = -1;
    }
    closedir(tasks);
    return result;
}
