{#- The routing process traced for one conversation key as it will be at $routed_at (a
    route whose LIFETIME ends before then is ignored, R1.4): the steps of sql/routing/, not
    a second copy of them. -#}
{% include 'routing/explain_bound_key.sql' %}
