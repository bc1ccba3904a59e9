// TEST-ONLY: kube-scheduler v1.33 with a minimal coscheduling plugin, for the kind suite's gang
// cases. scheduler-plugins (whose Coscheduling plugin real clusters run) and Volcano are not
// served by the Go module proxy this project builds from, so this is the smallest gang scheduler
// that speaks the same PodGroup API (scheduling.x-k8s.io/v1alpha1, the pod label
// scheduling.x-k8s.io/pod-group, spec.minMember), written for the test and nothing else.
//
// What it does, as Coscheduling does:
//   - PreFilter: a pod of a group is not considered until the group has minMember pods at all
//     (running, bound or pending, not terminating); otherwise it is unschedulable for now.
//   - Permit: a pod placed on a node waits until bound members plus pods waiting at Permit reach
//     minMember; then every waiting member is let through together. After an in-place restart
//     the carried-over pods are bound members, so a lone replacement completes the quorum.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

const (
	name       = "PhalanxGang"
	groupLabel = "scheduling.x-k8s.io/pod-group"
	permitWait = 20 * time.Second
)

var podGroups = schema.GroupVersionResource{
	Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups",
}

type gang struct {
	handle  framework.Handle
	dynamic dynamic.Interface
}

var (
	_ framework.PreFilterPlugin = &gang{}
	_ framework.PermitPlugin    = &gang{}
)

func newGang(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	client, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	return &gang{handle: h, dynamic: client}, nil
}

func (g *gang) Name() string { return name }

// minMember of the pod's group; 0 when the pod names no group (not a gang member).
func (g *gang) minMember(ctx context.Context, pod *v1.Pod) (string, int64, error) {
	group := pod.Labels[groupLabel]
	if group == "" {
		return "", 0, nil
	}
	found, err := g.dynamic.Resource(podGroups).Namespace(pod.Namespace).Get(ctx, group, metav1.GetOptions{})
	if err != nil {
		return group, 0, fmt.Errorf("PodGroup %s/%s: %w", pod.Namespace, group, err)
	}
	spec, _ := found.Object["spec"].(map[string]interface{})
	switch v := spec["minMember"].(type) {
	case int64:
		return group, v, nil
	case float64:
		return group, int64(v), nil
	}
	return group, 1, nil
}

// members of the group that are not terminating; bound counts those on a node already.
func (g *gang) members(pod *v1.Pod, group string) (all, bound int64, err error) {
	selector := labels.SelectorFromSet(labels.Set{groupLabel: group})
	pods, err := g.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(pod.Namespace).List(selector)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		all++
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return all, bound, nil
}

func (g *gang) PreFilter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	group, min, err := g.minMember(ctx, pod)
	if err != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	if group == "" {
		return nil, framework.NewStatus(framework.Success)
	}
	all, _, err := g.members(pod, group)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if all < min {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod group %s has %d of its minMember %d pods", group, all, min))
	}
	return nil, framework.NewStatus(framework.Success)
}

func (g *gang) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func (g *gang) Permit(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	group, min, err := g.minMember(ctx, pod)
	if err != nil {
		return framework.NewStatus(framework.Unschedulable, err.Error()), 0
	}
	if group == "" {
		return framework.NewStatus(framework.Success), 0
	}
	_, bound, err := g.members(pod, group)
	if err != nil {
		return framework.AsStatus(err), 0
	}
	var waiting []framework.WaitingPod
	g.handle.IterateOverWaitingPods(func(w framework.WaitingPod) {
		other := w.GetPod()
		if other.Namespace == pod.Namespace && other.Labels[groupLabel] == group && other.UID != pod.UID {
			waiting = append(waiting, w)
		}
	})
	if bound+int64(len(waiting))+1 < min {
		return framework.NewStatus(framework.Wait,
			fmt.Sprintf("waiting for %d members of pod group %s", min, group)), permitWait
	}
	for _, w := range waiting {
		w.Allow(name)
	}
	return framework.NewStatus(framework.Success), 0
}

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(name, newGang))
	os.Exit(cli.Run(command))
}
