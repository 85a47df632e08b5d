package clusterapi

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// The keys of the runtime-extension-maintenance-controller's protocol,
// spelled as that controller spells them, so that its users switch
// without relabelling anything.
const (
	prefix = "runtime-extension-maintenance-controller.cloud.sap/"

	// LabelEnabled: "true" on a Machine opts it in (set it on the
	// MachineDeployment's template).
	LabelEnabled = prefix + "enabled"
	// LabelMaintenance on a Machine asks for a maintenance (requested);
	// pitstop sets approved once the workload Node approves it. Removing
	// it ends the maintenance.
	LabelMaintenance = prefix + "maintenance"
	// MaintenanceRequested and MaintenanceApproved are its values.
	MaintenanceRequested = "requested"
	MaintenanceApproved  = "approved"

	// LabelMachineDeleted: "true" on the workload Node once its Machine
	// is being deleted.
	LabelMachineDeleted = prefix + "machine-deleted"
	// LabelApproveDeletion: "true" on the workload Node lets Cluster API
	// go on draining and deleting the Machine.
	LabelApproveDeletion = prefix + "approve-deletion"
	// LabelMachineMaintenance: "true" on the workload Node while its
	// Machine's maintenance is requested or approved.
	LabelMachineMaintenance = prefix + "machine-maintenance"
	// LabelApproveMaintenance: "true" on the workload Node approves the
	// Machine's maintenance.
	LabelApproveMaintenance = prefix + "approve-maintenance"

	// HookOwner is the value of the pre-drain hook and the owner in the
	// Metal3 reboot annotation.
	HookOwner = "runtime-extension-maintenance-controller"
	// AnnotationHook holds Cluster API's drain and deletion of the
	// Machine while it is there.
	AnnotationHook = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/maintenance-controller"
	// AnnotationReboot on a BareMetalHost asks Metal3 to reboot it.
	AnnotationReboot = "reboot.metal3.io/" + HookOwner

	// ConditionWorkloadReachable on a Machine says whether pitstop can
	// read its workload cluster.
	ConditionWorkloadReachable = "pitstop.dev/WorkloadClusterReachable"

	// kubeconfigKey is the key of the kubeconfig in Cluster API's
	// <cluster>-kubeconfig Secret.
	kubeconfigKey = "value"
)
