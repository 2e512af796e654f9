/*
 * kshim.h - just enough of the kernel's headers to compile lib/sort.c and
 * lib/group_cpus.c (Linux 6.1 to 7.2) in user space. Part of numalab's
 * kernel-C cross-check (tools/kernel_c/check_group_cpus.sh); no kernel
 * source is stored with it.
 *
 * The machine is a set of tables filled by the driver (driver.c) before
 * each run: cpu_possible_mask, cpu_present_mask, cpu_to_node(),
 * for_each_node(), topology_sibling_cpumask(), topology_cluster_cpumask().
 * WARN_ON() and WARN_ON_ONCE() count every time their condition holds.
 */
#ifndef NUMALAB_KSHIM_H
#define NUMALAB_KSHIM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_SMP 1
#define CONFIG_64BIT 1
#define CONFIG_HAVE_EFFICIENT_UNALIGNED_ACCESS 1

#define NR_CPUS 8192
#define MAX_NUMNODES 1024
#define BITS_PER_LONG 64
#define BITS_TO_LONGS(n) (((n) + BITS_PER_LONG - 1) / BITS_PER_LONG)

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef unsigned int gfp_t;
#define GFP_KERNEL 0u

#define __attribute_const__ __attribute__((__const__))
#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define data_race(x) (x)
#define EXPORT_SYMBOL(s)
#define EXPORT_SYMBOL_GPL(s)
#define ENOMEM 12
#define cond_resched() do { } while (0)

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))

extern unsigned long shim_warnings;
#define WARN_ON(cond) ({ int __w = !!(cond); if (__w) shim_warnings++; __w; })
#define WARN_ON_ONCE(cond) WARN_ON(cond)

/* allocation: kcalloc(0) in the kernel is ZERO_SIZE_PTR; calloc(0, .) here */
#define kcalloc(n, size, gfp) calloc((n), (size))
#define kzalloc(size, gfp) calloc(1, (size))
#define kzalloc_objs(T, n) calloc((n), sizeof(T))
#define kfree(p) free((void *)(p))

/* sort.h types */
typedef int (*cmp_func_t)(const void *a, const void *b);
typedef void (*swap_func_t)(void *a, void *b, int size);
typedef int (*cmp_r_func_t)(const void *a, const void *b, const void *priv);
typedef void (*swap_r_func_t)(void *a, void *b, int size, const void *priv);
void sort(void *base, size_t num, size_t size, cmp_func_t cmp_func, swap_func_t swap_func);
void sort_r(void *base, size_t num, size_t size, cmp_r_func_t cmp_func,
	    swap_r_func_t swap_func, const void *priv);

/* atomics (the rotate patch's counter) */
typedef struct { int counter; } atomic_t;
#define ATOMIC_INIT(i) { (i) }
static inline int atomic_fetch_inc(atomic_t *v)
{
	int old = v->counter;
	v->counter = (int)((unsigned int)old + 1u);
	return old;
}

/* cpumasks: CONFIG_CPUMASK_OFFSTACK=n */
struct cpumask { unsigned long bits[BITS_TO_LONGS(NR_CPUS)]; };
typedef struct cpumask cpumask_var_t[1];
extern unsigned int nr_cpu_ids;
extern unsigned int nr_node_ids;
extern struct cpumask shim_possible, shim_present;
extern struct cpumask shim_sibling[NR_CPUS], shim_cluster[NR_CPUS];
extern int shim_cpu_to_node[NR_CPUS];
extern int shim_node_possible[MAX_NUMNODES];
extern int shim_nr_node_possible;
#define cpu_possible_mask ((const struct cpumask *)&shim_possible)
#define cpu_present_mask ((const struct cpumask *)&shim_present)
#define cpu_to_node(cpu) (shim_cpu_to_node[(cpu)])
#define topology_sibling_cpumask(cpu) ((const struct cpumask *)&shim_sibling[(cpu)])
#define topology_cluster_cpumask(cpu) ((const struct cpumask *)&shim_cluster[(cpu)])

static inline int shim_test(unsigned int b, const unsigned long *w)
{
	return (w[b / BITS_PER_LONG] >> (b % BITS_PER_LONG)) & 1;
}
static inline void cpumask_set_cpu(unsigned int cpu, struct cpumask *m)
{
	m->bits[cpu / BITS_PER_LONG] |= 1UL << (cpu % BITS_PER_LONG);
}
static inline void cpumask_clear_cpu(int cpu, struct cpumask *m)
{
	m->bits[cpu / BITS_PER_LONG] &= ~(1UL << (cpu % BITS_PER_LONG));
}
static inline bool cpumask_test_cpu(int cpu, const struct cpumask *m)
{
	return shim_test(cpu, m->bits);
}
static inline bool cpumask_test_and_clear_cpu(int cpu, struct cpumask *m)
{
	bool was = shim_test(cpu, m->bits);
	cpumask_clear_cpu(cpu, m);
	return was;
}
/* next set bit after n (n = -1: the first), or nr_cpu_ids */
static inline unsigned int cpumask_next(int n, const struct cpumask *m)
{
	for (unsigned int b = (unsigned int)(n + 1); b < nr_cpu_ids; b++)
		if (shim_test(b, m->bits))
			return b;
	return nr_cpu_ids;
}
static inline unsigned int cpumask_first(const struct cpumask *m)
{
	return cpumask_next(-1, m);
}
#define for_each_cpu(cpu, mask) \
	for ((cpu) = -1; (cpu) = cpumask_next((cpu), (mask)), (cpu) < nr_cpu_ids;)
#define for_each_possible_cpu(cpu) for_each_cpu((cpu), cpu_possible_mask)
#define for_each_present_cpu(cpu) for_each_cpu((cpu), cpu_present_mask)

#define SHIM_WORDS BITS_TO_LONGS(NR_CPUS)
static inline void cpumask_clear(struct cpumask *d) { memset(d, 0, sizeof(*d)); }
static inline void cpumask_copy(struct cpumask *d, const struct cpumask *s) { *d = *s; }
static inline bool cpumask_and(struct cpumask *d, const struct cpumask *a, const struct cpumask *b)
{
	unsigned long any = 0;
	for (int i = 0; i < SHIM_WORDS; i++)
		any |= (d->bits[i] = a->bits[i] & b->bits[i]);
	return any != 0;
}
static inline bool cpumask_andnot(struct cpumask *d, const struct cpumask *a, const struct cpumask *b)
{
	unsigned long any = 0;
	for (int i = 0; i < SHIM_WORDS; i++)
		any |= (d->bits[i] = a->bits[i] & ~b->bits[i]);
	return any != 0;
}
static inline void cpumask_or(struct cpumask *d, const struct cpumask *a, const struct cpumask *b)
{
	for (int i = 0; i < SHIM_WORDS; i++)
		d->bits[i] = a->bits[i] | b->bits[i];
}
static inline bool cpumask_intersects(const struct cpumask *a, const struct cpumask *b)
{
	for (int i = 0; i < SHIM_WORDS; i++)
		if (a->bits[i] & b->bits[i])
			return true;
	return false;
}
static inline bool cpumask_empty(const struct cpumask *a)
{
	for (int i = 0; i < SHIM_WORDS; i++)
		if (a->bits[i])
			return false;
	return true;
}
static inline unsigned int cpumask_weight(const struct cpumask *a)
{
	unsigned int w = 0;
	for (int i = 0; i < SHIM_WORDS; i++)
		w += __builtin_popcountl(a->bits[i]);
	return w;
}
static inline unsigned int cpumask_weight_and(const struct cpumask *a, const struct cpumask *b)
{
	unsigned int w = 0;
	for (int i = 0; i < SHIM_WORDS; i++)
		w += __builtin_popcountl(a->bits[i] & b->bits[i]);
	return w;
}
static inline bool zalloc_cpumask_var(cpumask_var_t *m, gfp_t flags)
{
	(void)flags;
	cpumask_clear(*m);
	return true;
}
static inline void free_cpumask_var(cpumask_var_t m) { (void)m; }

/* nodemasks */
typedef struct { unsigned long bits[BITS_TO_LONGS(MAX_NUMNODES)]; } nodemask_t;
#define NODE_MASK_NONE ((nodemask_t){ { 0 } })
#define node_set(node, dst) ((dst).bits[(node) / BITS_PER_LONG] |= 1UL << ((node) % BITS_PER_LONG))
static inline int shim_next_node(int n, const nodemask_t *m)
{
	for (int b = n + 1; b < MAX_NUMNODES; b++)
		if (shim_test(b, m->bits))
			return b;
	return MAX_NUMNODES;
}
#define for_each_node_mask(node, mask) \
	for ((node) = shim_next_node(-1, &(mask)); (node) < MAX_NUMNODES; \
	     (node) = shim_next_node((node), &(mask)))
/* for_each_node(): node_possible_map, ascending */
#define for_each_node(node) \
	for (int __ni = 0; __ni < shim_nr_node_possible && ((node) = shim_node_possible[__ni], 1); __ni++)

#endif
