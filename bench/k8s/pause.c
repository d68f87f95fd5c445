/* The pod sandbox's process (the "pause" image): it holds the pod's namespaces and does nothing
   until the kubelet stops it. Built static by bench/k8s-local.sh, the only file of its image. */
#include <signal.h>
#include <unistd.h>

static void leave(int sig) {
    (void)sig;
    _exit(0);
}

int main(void) {
    signal(SIGINT, leave);
    signal(SIGTERM, leave);
    for (;;) {
        pause();
    }
}
