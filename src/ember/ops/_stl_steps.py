"""libstdc++'s sorting algorithms (GCC's bits/stl_algo.h and stl_heap.h: introsort,
introselect, heap selection, insertion sorts, with their thresholds), step for step on a
Python list, as PyTorch's CPU kernels run them through ``std::sort``, ``std::partial_sort``
and ``std::nth_element``. These are not stable: which of equal elements ends where is what
their steps leave, and PyTorch reports it (topk's positions among ties, mode's position).
kernels/ctopk.py runs the same steps in C.
"""

from __future__ import annotations

__all__ = ["Steps"]


class Steps:
    """libstdc++'s algorithms (bits/stl_algo.h, stl_heap.h) on the list ``a``, in place."""

    def __init__(self, a: list, comp):
        self.a, self.comp = a, comp

    def adjust_heap(self, first, hole, length, value):
        a, comp = self.a, self.comp
        top = second = hole
        while second < (length - 1) // 2:
            second = 2 * (second + 1)
            if comp(a[first + second], a[first + second - 1]):
                second -= 1
            a[first + hole] = a[first + second]
            hole = second
        if (length & 1) == 0 and second == (length - 2) // 2:
            second = 2 * (second + 1)
            a[first + hole] = a[first + second - 1]
            hole = second - 1
        parent = (hole - 1) // 2
        while hole > top and comp(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def pop_heap(self, first, last, result):
        value = self.a[result]
        self.a[result] = self.a[first]
        self.adjust_heap(first, 0, last - first, value)

    def heap_select(self, first, middle, last):
        length = middle - first
        if length >= 2:
            for parent in range((length - 2) // 2, -1, -1):
                self.adjust_heap(first, parent, length, self.a[first + parent])
        for i in range(middle, last):
            if self.comp(self.a[i], self.a[first]):
                self.pop_heap(first, middle, i)

    def sort_heap(self, first, last):
        while last - first > 1:
            last -= 1
            self.pop_heap(first, last, last)

    def partition_pivot(self, first, last):
        a, comp = self.a, self.comp
        x, y, z = first + 1, first + (last - first) // 2, last - 1
        if comp(a[x], a[y]):
            s = y if comp(a[y], a[z]) else z if comp(a[x], a[z]) else x
        else:
            s = x if comp(a[x], a[z]) else z if comp(a[y], a[z]) else y
        a[first], a[s] = a[s], a[first]
        lo, hi = first + 1, last
        while True:  # the unguarded partition around a[first]
            while comp(a[lo], a[first]):
                lo += 1
            hi -= 1
            while comp(a[first], a[hi]):
                hi -= 1
            if not lo < hi:
                return lo
            a[lo], a[hi] = a[hi], a[lo]
            lo += 1

    def linear_insert(self, last):
        a, comp = self.a, self.comp
        val = a[last]
        while comp(val, a[last - 1]):
            a[last] = a[last - 1]
            last -= 1
        a[last] = val

    def insertion_sort(self, first, last):
        a = self.a
        for i in range(first + 1, last):
            if self.comp(a[i], a[first]):
                a[first : i + 1] = [a[i]] + a[first:i]
            else:
                self.linear_insert(i)

    def sort(self, first, last):
        if last - first < 1:
            return
        self.introsort(first, last, 2 * ((last - first).bit_length() - 1))
        if last - first > 16:
            self.insertion_sort(first, first + 16)
            for i in range(first + 16, last):
                self.linear_insert(i)
        else:
            self.insertion_sort(first, last)

    def introsort(self, first, last, depth):
        while last - first > 16:
            if depth == 0:
                self.heap_select(first, last, last)
                self.sort_heap(first, last)
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            self.introsort(cut, last, depth)
            last = cut

    def nth_element(self, first, nth, last):
        if nth == last:
            return
        depth = 2 * ((last - first).bit_length() - 1)
        while last - first > 3:
            if depth == 0:
                self.heap_select(first, nth + 1, last)
                self.a[first], self.a[nth] = self.a[nth], self.a[first]
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            if cut <= nth:
                first = cut
            else:
                last = cut
        self.insertion_sort(first, last)
