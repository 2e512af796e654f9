#define _GNU_SOURCE
/* numalab arm64 experiment: static /init. Mounts proc/sys/devtmpfs, prints
 * the CPU cluster topology, the NVMe controller's IRQs and their managed
 * affinities, blk-mq queue maps of nvme0n1, the kernel log, then powers off. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <unistd.h>

static void cat(const char *label, const char *path)
{
	char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n;
	if (fd < 0) { printf("%s: (cannot open %s)\n", label, path); return; }
	printf("%s: ", label);
	while ((n = read(fd, buf, sizeof(buf) - 1)) > 0) { buf[n] = 0; fputs(buf, stdout); }
	close(fd);
	fflush(stdout);
}

static int cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static int listdir(const char *dir, char **names, int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d) return 0;
	while ((e = readdir(d)) && n < max)
		if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), cmp);
	return n;
}

int main(void)
{
	char path[512], label[512], *names[256];
	int i, n;

	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* give async probing a moment */
	sleep(2);

	printf("=== LAB BEGIN ===\n");
	cat("uname", "/proc/version");
	cat("cmdline", "/proc/cmdline");
	cat("possible", "/sys/devices/system/cpu/possible");
	cat("online", "/sys/devices/system/cpu/online");
	n = listdir("/sys/devices/system/cpu", names, 256);
	for (i = 0; i < n; i++) {
		if (strncmp(names[i], "cpu", 3) || names[i][3] < '0' || names[i][3] > '9') continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/%s/topology/cluster_cpus_list", names[i]);
		snprintf(label, sizeof(label), "%s cluster_cpus_list", names[i]);
		cat(label, path);
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/%s/topology/cluster_id", names[i]);
		snprintf(label, sizeof(label), "%s cluster_id", names[i]);
		cat(label, path);
	}
	printf("=== /proc/interrupts ===\n");
	cat("interrupts", "/proc/interrupts");
	printf("=== irq affinities ===\n");
	n = listdir("/proc/irq", names, 256);
	for (i = 0; i < n; i++) {
		if (names[i][0] < '0' || names[i][0] > '9') continue;
		snprintf(path, sizeof(path), "/proc/irq/%s/smp_affinity_list", names[i]);
		snprintf(label, sizeof(label), "irq %s smp_affinity_list", names[i]);
		cat(label, path);
		snprintf(path, sizeof(path), "/proc/irq/%s/effective_affinity_list", names[i]);
		snprintf(label, sizeof(label), "irq %s effective_affinity_list", names[i]);
		cat(label, path);
	}
	printf("=== pci msi_irqs ===\n");
	n = listdir("/sys/bus/pci/devices", names, 256);
	for (i = 0; i < n; i++) {
		char *m[256];
		int k, nm;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/msi_irqs", names[i]);
		nm = listdir(path, m, 256);
		printf("pci %s msi_irqs:", names[i]);
		for (k = 0; k < nm; k++) printf(" %s", m[k]);
		printf("\n");
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/irq", names[i]);
		snprintf(label, sizeof(label), "pci %s irq", names[i]);
		cat(label, path);
	}
	printf("=== blk-mq nvme0n1 ===\n");
	n = listdir("/sys/block/nvme0n1/mq", names, 256);
	printf("nvme0n1 hw queues: %d\n", n);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/sys/block/nvme0n1/mq/%s/cpu_list", names[i]);
		snprintf(label, sizeof(label), "mq %s cpu_list", names[i]);
		cat(label, path);
	}
	printf("=== dmesg ===\n");
	{
		static char kbuf[1 << 20];
		int len = klogctl(3, kbuf, sizeof(kbuf));
		if (len > 0) fwrite(kbuf, 1, len, stdout);
	}
	printf("\n=== LAB END ===\n");
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
