// One binary for the parts of a one-node cluster, as hyperkube was: the first argument
// names the part (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, and kubectl of
// the same version), the rest are its own flags. bench/k8s-local.sh builds it from the Go
// module proxy's k8s.io/kubernetes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl [flags]")
		os.Exit(2)
	}
	var cmd *cobra.Command
	switch os.Args[1] {
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubelet":
		cmd = kubelet.NewKubeletCommand(context.Background())
	case "kubectl":
		cmd = kubectl.NewDefaultKubectlCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube: no part named %q\n", os.Args[1])
		os.Exit(2)
	}
	os.Args = append(os.Args[:1], os.Args[2:]...)
	os.Exit(cli.Run(cmd))
}
