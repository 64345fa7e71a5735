#include "ccurlshim.h"
CURLcode ccurl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode ccurl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode ccurl_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
CURLcode ccurl_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
CURLcode ccurl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
CURLcode ccurl_setopt_data_cb(CURL *h, CURLoption o, ccurl_data_cb cb) { return curl_easy_setopt(h, o, cb); }
CURLcode ccurl_setopt_xferinfo_cb(CURL *h, ccurl_xferinfo_cb cb) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb); }
CURLcode ccurl_getinfo_long(CURL *h, CURLINFO i, long *o) { return curl_easy_getinfo(h, i, o); }
CURLcode ccurl_getinfo_socket(CURL *h, curl_socket_t *o) { return curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, o); }
CURLcode ccurl_getinfo_ptr(CURL *h, CURLINFO i, void **o) { return curl_easy_getinfo(h, i, o); }
CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
CURLMcode ccurl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
CURLMcode ccurl_multi_setopt_socket_cb(CURLM *m, ccurl_socket_cb cb) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, cb); }
CURLMcode ccurl_multi_setopt_timer_cb(CURLM *m, ccurl_timer_cb cb) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, cb); }
