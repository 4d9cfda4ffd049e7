{{/*
kubevirt-ovn.static renders a manifest of deploy/ (files/, symlinks to
it: one source for both) in the release's namespace.
*/}}
{{- define "kubevirt-ovn.static" -}}
{{ .root.Files.Get .file | replace "namespace: kubevirt-ovn" (printf "namespace: %s" .root.Release.Namespace) }}
{{- end -}}

{{/* kubevirt-ovn.image is the image of every container. */}}
{{- define "kubevirt-ovn.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* kubevirt-ovn.probes are every container's port, probes and resources. */}}
{{- define "kubevirt-ovn.probes" -}}
ports:
  - name: http
    containerPort: 8080
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
resources:
  {{- toYaml .Values.resources | nindent 2 }}
{{- end -}}

{{/* kubevirt-ovn.podenv is the environment every container shares. */}}
{{- define "kubevirt-ovn.podenv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef: {fieldPath: metadata.namespace}
- name: POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
{{- end -}}
