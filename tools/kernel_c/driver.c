/*
 * driver.c - runs a kernel's group_cpus_evenly() and sort() on machines and
 * queries read from stdin; part of numalab's kernel-C cross-check
 * (tools/kernel_c/check_group_cpus.sh). It #includes the group_cpus.c under
 * test (GROUP_CPUS_C, a path given with -D) so that it can reach the file's
 * static ncpus_cmp_func() and, in the rotate build, the patch's
 * group_spread_cnt counter.
 *
 * Input, one command per line (cpulists as "0-3,8", "-" for empty):
 *   machine NR_CPU_IDS NR_NODE_IDS
 *   possible CPULIST
 *   present CPULIST
 *   nodes ID...                      for_each_node() order
 *   cpu CPU NODE SIBLINGS CLUSTER    one line per possible CPU
 *   call NUMGRPS SPREAD_OFFSET       -> "result NUMMASKS|- WARNINGS" + NUMGRPS "mask CPULIST" lines
 *   sort N KEY...                    -> "order I..." (ncpus_cmp_func on {id, ncpus})
 * Build defines: NUMALAB_NUMMASKS (the two-argument group_cpus_evenly()),
 * NUMALAB_ROTATE (the seed patch applied: group_spread_cnt exists).
 */
#include "kshim.h"
#include <stdio.h>

unsigned long shim_warnings;
unsigned int nr_cpu_ids;
unsigned int nr_node_ids;
struct cpumask shim_possible, shim_present;
struct cpumask shim_sibling[NR_CPUS], shim_cluster[NR_CPUS];
int shim_cpu_to_node[NR_CPUS];
int shim_node_possible[MAX_NUMNODES];
int shim_nr_node_possible;

#include GROUP_CPUS_C

static void die(const char *what)
{
	fprintf(stderr, "driver: %s\n", what);
	exit(2);
}

static void parse_cpulist(const char *s, struct cpumask *m)
{
	cpumask_clear(m);
	if (!strcmp(s, "-"))
		return;
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s)
			die("bad cpulist");
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (a < 0 || b >= NR_CPUS || b < a)
			die("cpulist out of range");
		for (long c = a; c <= b; c++)
			cpumask_set_cpu((unsigned int)c, m);
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			die("bad cpulist separator");
	}
}

static void print_cpulist(const struct cpumask *m)
{
	int first = 1;
	for (unsigned int c = 0; c < NR_CPUS; c++) {
		if (!shim_test(c, m->bits))
			continue;
		unsigned int e = c;
		while (e + 1 < NR_CPUS && shim_test(e + 1, m->bits))
			e++;
		printf(first ? "" : ",");
		if (e == c)
			printf("%u", c);
		else
			printf("%u-%u", c, e);
		first = 0;
		c = e;
	}
	if (first)
		printf("-");
}

static void call(unsigned int numgrps, unsigned int offset)
{
	struct cpumask *masks;
	shim_warnings = 0;
#ifdef NUMALAB_ROTATE
	group_spread_cnt.counter = (int)offset;	/* atomic_fetch_inc() returns it */
#else
	(void)offset;
#endif
#ifdef NUMALAB_NUMMASKS
	unsigned int nummasks = 0;
	masks = group_cpus_evenly(numgrps, &nummasks);
#else
	masks = group_cpus_evenly(numgrps);
#endif
	if (!masks) {
		printf("result null %lu\n", shim_warnings);
		return;
	}
#ifdef NUMALAB_NUMMASKS
	printf("result %u %lu\n", nummasks, shim_warnings);
#else
	printf("result - %lu\n", shim_warnings);
#endif
	for (unsigned int i = 0; i < numgrps; i++) {
		printf("mask ");
		print_cpulist(&masks[i]);
		printf("\n");
	}
	kfree(masks);
}

int main(void)
{
	static char line[1 << 20];
	while (fgets(line, sizeof(line), stdin)) {
		char cmd[32], a[1 << 16], b[1 << 16];
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%31s", cmd) != 1)
			continue;
		if (!strcmp(cmd, "machine")) {
			if (sscanf(line, "%*s %u %u", &nr_cpu_ids, &nr_node_ids) != 2)
				die("bad machine line");
			if (nr_cpu_ids > NR_CPUS || nr_node_ids > MAX_NUMNODES)
				die("machine too large for the shim");
			memset(shim_sibling, 0, sizeof(shim_sibling));
			memset(shim_cluster, 0, sizeof(shim_cluster));
			for (int i = 0; i < NR_CPUS; i++)
				shim_cpu_to_node[i] = -1;
			shim_nr_node_possible = 0;
		} else if (!strcmp(cmd, "possible") || !strcmp(cmd, "present")) {
			if (sscanf(line, "%*s %65535s", a) != 1)
				die("bad mask line");
			parse_cpulist(a, cmd[1] == 'o' ? &shim_possible : &shim_present);
		} else if (!strcmp(cmd, "nodes")) {
			char *p = line + 5;
			int n, used;
			while (sscanf(p, "%d%n", &n, &used) == 1) {
				if (n < 0 || n >= MAX_NUMNODES || shim_nr_node_possible >= MAX_NUMNODES)
					die("bad node id");
				shim_node_possible[shim_nr_node_possible++] = n;
				p += used;
			}
		} else if (!strcmp(cmd, "cpu")) {
			int cpu, node;
			if (sscanf(line, "%*s %d %d %65535s %65535s", &cpu, &node, a, b) != 4)
				die("bad cpu line");
			if (cpu < 0 || cpu >= NR_CPUS)
				die("bad cpu id");
			shim_cpu_to_node[cpu] = node;
			parse_cpulist(a, &shim_sibling[cpu]);
			parse_cpulist(b, &shim_cluster[cpu]);
		} else if (!strcmp(cmd, "call")) {
			unsigned int numgrps, offset;
			if (sscanf(line, "%*s %u %u", &numgrps, &offset) != 2)
				die("bad call line");
			call(numgrps, offset);
		} else if (!strcmp(cmd, "sort")) {
			char *p = line + 4;
			int num, used;
			if (sscanf(p, "%d%n", &num, &used) != 1 || num < 0)
				die("bad sort line");
			p += used;
			struct node_groups *ng = calloc((size_t)num + 1, sizeof(*ng));
			for (int i = 0; i < num; i++) {
				unsigned int k;
				if (sscanf(p, "%u%n", &k, &used) != 1)
					die("bad sort key");
				p += used;
				ng[i].id = (unsigned int)i;
				ng[i].ncpus = k;
			}
			sort(ng, (size_t)num, sizeof(ng[0]), ncpus_cmp_func, NULL);
			printf("order");
			for (int i = 0; i < num; i++)
				printf(" %u", ng[i].id);
			printf("\n");
			free(ng);
		} else if (!strcmp(cmd, "end")) {
			break;
		} else {
			die("unknown command");
		}
	}
	return 0;
}
