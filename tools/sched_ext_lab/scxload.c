/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scxload: the wakeup-heavy workloads of numalab's sched_ext lab, and one
 * helper the guest's /init needs. Statically linked into the initramfs.
 *
 *   scxload pingpong PAIRS ITERS [pin]   PAIRS pairs of processes bounce one
 *                                        byte ITERS times over two pipes (each
 *                                        write wakes the reader with WF_SYNC);
 *                                        "pin": pair i runs on the CPUs of node
 *                                        i % nodes (a node's CPU set, so
 *                                        ops.select_cpu() still runs: tasks
 *                                        allowed on one CPU skip it)
 *   scxload fork N [pin]                 fork a child that exits at once and
 *                                        wait for it, N times ("pin": node 0)
 *   scxload offarg HEX OFF               print HEX + OFF (decimal) as a signed
 *                                        kprobe dereference offset, "+0x..." or
 *                                        "-0x..." (kstrtol() takes no 64-bit
 *                                        kernel address, busybox sh overflows)
 *
 * Exit status 0 on success; a failing system call prints one line and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "scxload: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* CPUs of node N from sysfs into set; returns the number of CPUs. */
static int node_cpus(int node, cpu_set_t *set)
{
	char path[96], buf[512];
	FILE *f;
	char *p;
	int n = 0;

	CPU_ZERO(set);
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	for (p = buf; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long c = a; c <= b; c++, n++)
			CPU_SET(c, set);
		p = (*end == ',') ? end + 1 : end;
	}
	return n;
}

/* Nodes that have CPUs, in order. */
static int cpu_nodes(int *out, int max)
{
	int n = 0;
	cpu_set_t s;

	for (int node = 0; node < 64 && n < max; node++)
		if (node_cpus(node, &s) > 0)
			out[n++] = node;
	return n;
}

static void pin_to_node(int node)
{
	cpu_set_t s;

	if (node_cpus(node, &s) <= 0)
		return;
	if (sched_setaffinity(0, sizeof(s), &s))
		die("sched_setaffinity");
}

static void bounce(int rfd, int wfd, long iters, int first)
{
	char c = 'x';

	for (long i = 0; i < iters; i++) {
		if (first && write(wfd, &c, 1) != 1)
			die("write");
		if (read(rfd, &c, 1) != 1)
			die("read");
		if (!first && write(wfd, &c, 1) != 1)
			die("write");
	}
}

static int pingpong(long pairs, long iters, int pin)
{
	int nodes[64], nn = cpu_nodes(nodes, 64);

	for (long i = 0; i < pairs; i++) {
		int ab[2], ba[2];

		if (pipe(ab) || pipe(ba))
			die("pipe");
		for (int side = 0; side < 2; side++) {
			pid_t pid = fork();

			if (pid < 0)
				die("fork");
			if (pid == 0) {
				if (pin && nn > 0)
					pin_to_node(nodes[i % nn]);
				if (side == 0)
					bounce(ba[0], ab[1], iters, 1);
				else
					bounce(ab[0], ba[1], iters, 0);
				_exit(0);
			}
		}
		close(ab[0]); close(ab[1]); close(ba[0]); close(ba[1]);
	}
	for (long i = 0; i < 2 * pairs; i++) {
		int st;

		if (wait(&st) < 0)
			die("wait");
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	return 0;
}

static int forkloop(long n, int pin)
{
	int nodes[64], nn = cpu_nodes(nodes, 64);

	if (pin && nn > 0)
		pin_to_node(nodes[0]);
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &st, 0) < 0)
			die("waitpid");
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "pingpong"))
		return pingpong(atol(argv[2]), atol(argv[3]), argc > 4 && !strcmp(argv[4], "pin"));
	if (argc >= 3 && !strcmp(argv[1], "fork"))
		return forkloop(atol(argv[2]), argc > 3 && !strcmp(argv[3], "pin"));
	if (argc == 4 && !strcmp(argv[1], "offarg")) {
		uint64_t v = strtoull(argv[2], NULL, 16) + (uint64_t)strtoll(argv[3], NULL, 10);

		if (v >> 63)
			printf("-0x%llx\n", (unsigned long long)(0 - v));
		else
			printf("+0x%llx\n", (unsigned long long)v);
		return 0;
	}
	fprintf(stderr, "usage: scxload pingpong PAIRS ITERS [pin] | fork N [pin] | offarg HEX OFF\n");
	return 2;
}
